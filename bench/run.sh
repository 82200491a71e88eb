#!/usr/bin/env bash
# Session store benchmarks: nanogate (criterion, benches/sessions.rs) against nanobot's own SessionManager
# (bench/nanobot_sessions.py), both on the same generated session files, then a table with times and ratios.
#
# Usage: bench/run.sh [criterion arguments, e.g. a filter or --quick]
#
# Environment:
#   CARGO_TARGET_DIR        cargo's target directory (default: <repo>/target)
#   NANOGATE_BENCH_DIR      working directory for files and results (default: $CARGO_TARGET_DIR/nanogate-bench)
#   NANOGATE_BENCH_VENV     virtualenv for nanobot-ai (default: $CARGO_TARGET_DIR/nanobot-venv; reused when valid)
#   NANOGATE_BENCH_BUDGET   seconds per nanobot measurement (default: 3)
#   NANOGATE_BENCH_STRICT   1: exit 1 when a target is missed
#   PYTHON                  Python used to create the virtualenv and to generate the files (default: python3)
#
# Everything is written under the two directories above and the system temporary directory; nothing touches the
# network except pip installing nanobot-ai and loguru from the package index when the virtualenv is missing.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
work="${NANOGATE_BENCH_DIR:-$CARGO_TARGET_DIR/nanogate-bench}"
venv="${NANOGATE_BENCH_VENV:-$CARGO_TARGET_DIR/nanobot-venv}"
budget="${NANOGATE_BENCH_BUDGET:-3}"
python="${PYTHON:-python3}"
nanobot_pkg="nanobot-ai==0.1.4.post3"
loguru_pkg="loguru==0.7.3"

files="$work/files"
crit="$work/criterion"
nb_json="$work/nanobot.json"
mkdir -p "$work"
rm -rf "$crit" "$nb_json"

# Each step shows the load average: the numbers mean little on a busy machine.
step() { printf '\n== %s (load average %s)\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"; }

step "build (cargo bench --no-run, target dir $CARGO_TARGET_DIR)"
# The benchmark executable is run directly later, so a source change during the run cannot trigger a rebuild
# in the middle of the measurements.
bench_exe="$(cargo bench --bench sessions --no-run --message-format=json-render-diagnostics |
    "$python" -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "sessions":
        print(m["executable"])
' | tail -n 1)"
[ -x "$bench_exe" ] || { echo "error: cannot find the benchmark executable" >&2; exit 1; }
echo "$bench_exe"

step "generate session files in $files"
"$python" bench/nanobot_sessions.py generate --out "$files"

step "nanobot ($nanobot_pkg) virtualenv in $venv"
nanobot_ok=0
check_venv() {
    "$venv/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as m
import nanobot.session.manager  # noqa: F401
assert m.version("nanobot-ai") == "0.1.4.post3"
PY
}
if [ -x "$venv/bin/python" ] && check_venv; then
    nanobot_ok=1
    echo "reusing $venv"
elif [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    echo "SKIPPED: nanobot side: $venv exists and is not a virtualenv; not touching it"
else
    if "$python" -m venv "$venv" >"$work/venv.log" 2>&1 &&
        "$venv/bin/python" -m pip install --disable-pip-version-check -q --no-deps "$nanobot_pkg" "$loguru_pkg" \
            >>"$work/venv.log" 2>&1 &&
        check_venv; then
        nanobot_ok=1
        echo "installed $nanobot_pkg and $loguru_pkg"
    else
        echo "SKIPPED: nanobot side: could not install $nanobot_pkg into $venv (see $work/venv.log); nanogate runs alone"
    fi
fi

if [ "$nanobot_ok" = 1 ]; then
    step "nanobot SessionManager (about ${budget}s per measurement)"
    "$venv/bin/python" bench/nanobot_sessions.py bench --files "$files" --out "$nb_json" --budget "$budget"
fi

step "nanogate (criterion)"
NANOGATE_BENCH_SESSIONS="$files" CRITERION_HOME="$crit" "$bench_exe" --bench "$@" 2>&1 | tee "$work/criterion.log"

report_args=(--criterion "$crit" --files "$files")
[ "$nanobot_ok" = 1 ] && report_args+=(--nanobot "$nb_json")
[ "${NANOGATE_BENCH_STRICT:-0}" = 1 ] && report_args+=(--strict)
"$python" bench/nanobot_sessions.py report "${report_args[@]}" | tee "$work/table.txt"
