//! Placeholder replaced by the agent benchmark.
fn main() {}
