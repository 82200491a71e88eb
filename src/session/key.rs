//! Session key → file name, exactly as nanobot does it, plus a second name for keys nanobot would mix.
//!
//! nanobot's mapping (`safe_filename(key.replace(":", "_")) + ".jsonl"`) is lossy: `telegram:a_b` and
//! `telegram:a:b` both become `telegram_a_b.jsonl`, and nanobot then mixes the two conversations in one file.
//! nanogate keeps nanobot's name for the key that owns the file (the `key` on its line 1) and gives any other key
//! that maps there its own stable name: [`alternate_file_name`], the nanobot stem plus `~` and the 16-hex-digit
//! FNV-1a 64 hash of the key's UTF-8 bytes (`telegram_a_b~3f2a….jsonl`). nanobot still lists such a file under
//! the right key, because it reads the key from line 1.

/// Longest file name nanogate creates; leaves room for the alternate suffix under the usual 255-byte limit.
const MAX_NAME_BYTES: usize = 255;
/// Length of `~` + 16 hex digits.
const ALTERNATE_SUFFIX_BYTES: usize = 17;

/// A key that cannot name a session file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Empty, or only whitespace (nanobot would write a hidden `.jsonl`).
    #[error(
        "session key {0:?} is empty after trimming whitespace; use a key like \"channel:chat_id\""
    )]
    Empty(String),
    /// Contains a NUL character, which no file name can hold.
    #[error("session key {0:?} contains a NUL character, which cannot be part of a file name")]
    Nul(String),
    /// The file name would be longer than the file system allows.
    #[error(
        "session key is too long: its file name would take {len} bytes, at most {max} are allowed"
    )]
    TooLong {
        /// Bytes the name would need.
        len: usize,
        /// Bytes allowed.
        max: usize,
    },
}

/// nanobot's `safe_filename(key.replace(":", "_")) + ".jsonl"`, after checking the key can name a file.
pub fn file_name(key: &str) -> Result<String, KeyError> {
    let stem = stem(key)?;
    Ok(format!("{stem}.jsonl"))
}

/// The stable name for a key whose nanobot file name is already owned by another key.
pub fn alternate_file_name(key: &str) -> Result<String, KeyError> {
    let stem = stem(key)?;
    Ok(format!("{stem}~{:016x}.jsonl", fnv1a64(key.as_bytes())))
}

/// What nanobot's `list_sessions` guesses as the key when line 1 names none: the stem with its first `_`
/// turned back into `:`.
pub fn key_from_file_name(name: &str) -> String {
    let stem = name.strip_suffix(".jsonl").unwrap_or(name);
    let stem = stem.split_once('~').map_or(stem, |(s, _)| s);
    stem.replacen('_', ":", 1)
}

fn stem(key: &str) -> Result<String, KeyError> {
    if key.contains('\0') {
        return Err(KeyError::Nul(key.to_owned()));
    }
    let replaced: String = key
        .chars()
        .map(|c| {
            if matches!(c, ':' | '<' | '>' | '"' | '/' | '\\' | '|' | '?' | '*') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let stem = replaced.trim_matches(super::python_space);
    if stem.is_empty() {
        return Err(KeyError::Empty(key.to_owned()));
    }
    let len = stem.len() + ".jsonl".len() + ALTERNATE_SUFFIX_BYTES;
    if len > MAX_NAME_BYTES {
        return Err(KeyError::TooLong {
            len,
            max: MAX_NAME_BYTES,
        });
    }
    Ok(stem.to_owned())
}

/// FNV-1a, 64 bit: tiny, stable across versions and platforms, and documented, which is all a file name needs.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanobot_names() {
        assert_eq!(
            file_name("telegram:12345678").unwrap(),
            "telegram_12345678.jsonl"
        );
        assert_eq!(
            file_name("../../etc/passwd").unwrap(),
            ".._.._etc_passwd.jsonl"
        );
        assert_eq!(file_name("  padded  ").unwrap(), "padded.jsonl");
    }

    #[test]
    fn alternate_names_are_stable_and_distinct() {
        let a = alternate_file_name("telegram:a_b").unwrap();
        let b = alternate_file_name("telegram:a:b").unwrap();
        assert_ne!(a, b);
        assert_eq!(a, alternate_file_name("telegram:a_b").unwrap());
        assert_eq!(
            a,
            format!("telegram_a_b~{:016x}.jsonl", fnv1a64(b"telegram:a_b"))
        );
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn bad_keys_are_clear_errors() {
        assert!(matches!(file_name(""), Err(KeyError::Empty(_))));
        assert!(matches!(file_name(" \t "), Err(KeyError::Empty(_))));
        assert!(matches!(file_name("a\0b"), Err(KeyError::Nul(_))));
        assert!(matches!(
            file_name(&"x".repeat(300)),
            Err(KeyError::TooLong { .. })
        ));
        let msg = file_name("").unwrap_err().to_string();
        assert!(msg.contains("empty"), "{msg}");
    }

    #[test]
    fn key_guess_from_name() {
        assert_eq!(
            key_from_file_name("telegram_12345678.jsonl"),
            "telegram:12345678"
        );
        assert_eq!(
            key_from_file_name("telegram_a_b~0011223344556677.jsonl"),
            "telegram:a_b"
        );
    }
}
