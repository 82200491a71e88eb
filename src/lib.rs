//! nanogate: a nanobot-compatible chat gateway daemon for a personal LLM agent.
//!
//! The library holds everything the `nanogate` binary does, so integration tests and benchmarks drive the same
//! code. `json` is the Python-compatible codec, `session` the nanobot-compatible session store, `config` the
//! configuration file and its environment overrides, `gateway` the daemon (`nanogate gateway`) and `channels`
//! its Telegram and Discord adapters, `import` the migration from a nanobot installation, `notify` systemd's
//! readiness protocol; `heap` and `shrink` give back the memory a burst of chats used.

pub mod admin;
pub mod agent;
pub mod atomic_write;
pub mod bus;
pub mod channels;
pub mod cli;
pub mod config;
pub mod cron;
pub mod gateway;
pub mod heap;
pub mod import;
pub mod json;
pub mod metrics;
pub mod notify;
pub mod provider;
pub mod session;
pub mod shrink;
pub mod tools;
