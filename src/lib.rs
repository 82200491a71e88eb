//! nanogate: a nanobot-compatible chat gateway daemon for a personal LLM agent.
//!
//! The library holds everything the `nanogate` binary does, so integration tests and benchmarks drive the same
//! code. `json` is the Python-compatible codec, `session` the nanobot-compatible session store, `config` the
//! configuration file and its environment overrides, `import` the migration from a nanobot installation, and
//! `notify` systemd's readiness protocol.
//! configuration file and its environment overrides, `gateway` the daemon (`nanogate gateway`) and `channels`
//! its Telegram and Discord adapters.

pub mod admin;
pub mod agent;
pub mod atomic_write;
pub mod bus;
pub mod channels;
pub mod cli;
pub mod config;
pub mod cron;
pub mod gateway;
pub mod import;
pub mod json;
pub mod metrics;
pub mod notify;
pub mod provider;
pub mod session;
pub mod tools;
