#!/usr/bin/env bash
# Agent throughput benchmark: nanogate's lanes (benches/agent.rs) against nanobot 0.1.4's AgentLoop
# (bench/nanobot_agent.py), both against the same fake model server (the bench binary's --serve-fake) with the same
# messages, then one table with turns per second and ratios.
#
# Usage: bench/run_agent.sh [--quick]      (--quick: a few turns per scenario, to check that everything runs)
#
# Environment:
#   CARGO_TARGET_DIR           cargo's target directory (default: <repo>/target)
#   NANOGATE_BENCH_DIR         working directory for results (default: $CARGO_TARGET_DIR/nanogate-bench)
#   NANOGATE_AGENT_BENCH_VENV  virtualenv for nanobot-ai with its dependencies
#                              (default: $CARGO_TARGET_DIR/nanobot-agent-venv; reused when valid)
#   NANOGATE_AGENT_BENCH_TMP   directory for the temporary workspaces of both sides (default: the system one;
#                              the fsync column depends on its file system)
#   NANOGATE_BENCH_STRICT      1: exit 1 when a target is missed
#   PYTHON                     Python used to create the virtualenv and print the table (default: python3)
#
# Writes only under the directories above and the system temporary directory. The network is used only by pip,
# to install nanobot-ai and its dependencies when the virtualenv is missing; both sides talk to the fake model on
# 127.0.0.1. Takes about 2 minutes after the build on a 2-core machine.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
work="${NANOGATE_BENCH_DIR:-$CARGO_TARGET_DIR/nanogate-bench}"
venv="${NANOGATE_AGENT_BENCH_VENV:-$CARGO_TARGET_DIR/nanobot-agent-venv}"
python="${PYTHON:-python3}"
nanobot_pkg="nanobot-ai==0.1.4.post3"

quick=()
for arg in "$@"; do
    case "$arg" in
    --quick) quick=(--quick) ;;
    *)
        echo "usage: bench/run_agent.sh [--quick]" >&2
        exit 2
        ;;
    esac
done

ng_json="$work/agent-nanogate.json"
nb_json="$work/agent-nanobot.json"
mkdir -p "$work"
rm -f "$ng_json" "$nb_json"

step() { printf '\n== %s\n' "$*"; }

step "build (cargo bench --bench agent --no-run, target dir $CARGO_TARGET_DIR)"
cargo bench --bench agent --no-run
bin="$(cargo bench --bench agent --no-run --message-format=json 2>/dev/null | "$python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "agent" and m.get("executable"):
        print(m["executable"])
')"
[ -x "$bin" ] || { echo "cannot find the agent bench binary" >&2; exit 1; }

step "nanogate (cargo bench --bench agent)"
if [ "${#quick[@]}" = 0 ]; then
    cargo bench --bench agent -- --out "$ng_json"
else
    "$bin" --out "$ng_json" # without --bench: the smoke-test sizes
fi

step "nanobot ($nanobot_pkg with its dependencies) virtualenv in $venv"
nanobot_ok=0
skipped=""
check_venv() {
    "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as m
import os, tempfile
os.environ["HOME"] = tempfile.mkdtemp()
import nanobot.agent.loop  # noqa: F401
import nanobot.providers.custom_provider  # noqa: F401
assert m.version("nanobot-ai") == "0.1.4.post3"
PY
}
if [ -x "$venv/bin/python" ] && check_venv; then
    nanobot_ok=1
    echo "reusing $venv"
elif [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    skipped="$venv exists and is not a virtualenv; not touching it"
else
    echo "installing $nanobot_pkg (this pulls litellm, openai, ...; a minute or two)"
    if "$python" -m venv "$venv" >"$work/agent-venv.log" 2>&1 &&
        "$venv/bin/python" -m pip install --disable-pip-version-check -q "$nanobot_pkg" >>"$work/agent-venv.log" 2>&1 &&
        check_venv; then
        nanobot_ok=1
        echo "installed $nanobot_pkg"
    else
        skipped="could not install $nanobot_pkg into $venv (see $work/agent-venv.log)"
    fi
fi

if [ "$nanobot_ok" = 1 ]; then
    step "nanobot AgentLoop (about 90 seconds)"
    if ! "$venv/bin/python" bench/nanobot_agent.py bench --fake-bin "$bin" --out "$nb_json" "${quick[@]}"; then
        skipped="the nanobot run failed (see above)"
        rm -f "$nb_json"
    fi
fi
[ -n "$skipped" ] && echo "SKIPPED: nanobot side: $skipped; nanogate runs alone"

report_args=(--nanogate "$ng_json")
[ -f "$nb_json" ] && report_args+=(--nanobot "$nb_json")
[ -n "$skipped" ] && report_args+=(--skipped "$skipped")
[ "${NANOGATE_BENCH_STRICT:-0}" = 1 ] && report_args+=(--strict)
"$python" bench/nanobot_agent.py report "${report_args[@]}" | tee "$work/agent-table.txt"
