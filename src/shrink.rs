//! Giving back the tables a burst of chats grew.
//!
//! Maps keyed by chat (lanes, send queues, the session cache) empty out on their own when chats go quiet, but
//! a hash table never shrinks by itself: after 10,000 chats in a minute it keeps room for 10,000 forever. The
//! owners call [`shrink_when_sparse`] after removing entries, so memory follows the chats that are active now.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// Tables this small are left alone: shrinking them would cost more than it frees.
const MIN_CAPACITY: usize = 64;

/// Whether a table holding `len` entries in room for `capacity` should shrink: it is past the minimum size and
/// under a quarter full.
pub fn is_sparse(len: usize, capacity: usize) -> bool {
    capacity > MIN_CAPACITY && len * 4 < capacity
}

/// Shrinks `map` to twice its length once it is under a quarter full. The next shrink comes only after half of
/// what remains has gone, so the cost stays amortised O(1) per removal.
pub fn shrink_when_sparse<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    if is_sparse(map.len(), map.capacity()) {
        map.shrink_to(map.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grown_map_shrinks_as_it_empties_and_a_small_one_is_left_alone() {
        let mut map: HashMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let grown = map.capacity();
        for i in 0..9_990 {
            map.remove(&i);
            shrink_when_sparse(&mut map);
        }
        assert!(
            map.capacity() < grown / 100,
            "capacity {} of {grown}",
            map.capacity()
        );
        assert_eq!(map.len(), 10);
        assert!((9_990..10_000).all(|i| map.get(&i) == Some(&i)));

        let mut small: HashMap<u32, u32> = HashMap::with_capacity(MIN_CAPACITY / 2);
        let room = small.capacity();
        assert!(room <= MIN_CAPACITY);
        small.insert(1, 1);
        shrink_when_sparse(&mut small);
        assert_eq!(small.capacity(), room);
    }
}
