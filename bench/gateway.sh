#!/usr/bin/env bash
# Gateway benchmark: the release `nanogate gateway` binary against the fake Telegram Bot API, the fake Discord
# REST + gateway and an instant fake model, all on 127.0.0.1 (tests/gateway_bench.rs). Prints a markdown table:
# startup to ready, idle RSS, msgs/s for BENCH_CHATS chats (default 10000) with one message each, RSS after, and
# RSS after idle eviction (BENCH_IDLE_SECS, default 200: the session cache idles out after 1 min, freed memory is
# returned once a minute), each RSS split into heap, other anonymous memory and mapped files. BENCH_BIN runs
# another build of the binary on the same harness.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --test gateway_bench -- --ignored --nocapture 2>&1 | grep -E '^\|'
