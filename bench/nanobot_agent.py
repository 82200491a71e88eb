#!/usr/bin/env python3
"""Agent throughput benchmark, Python side: nanobot 0.1.4's AgentLoop against the same fake model as nanogate.

Subcommands:

  bench --fake-bin BIN --out RESULTS.json [--quick]
      Needs nanobot-ai==0.1.4.post3 with its dependencies (the virtualenv bench/run_agent.sh makes). Starts
      `BIN --serve-fake` (the agent bench binary of benches/agent.rs: the very fake server nanogate is measured
      against), then drives nanobot's AgentLoop with nanobot's own OpenAI-compatible provider (CustomProvider:
      the openai SDK's AsyncOpenAI over HTTP, no LiteLLM) in two ways:

        gateway  AgentLoop.run() fed through its MessageBus, replies read from the bus: nanobot's gateway path,
                 the counterpart of nanogate's Router (nanobot 0.1.4 runs these turns under one global lock)
        direct   AgentLoop.process_direct() called concurrently per key: nanobot's CLI/cron path, no global lock

      on the scenarios of benches/agent.rs: 1key (200 turns in a row), 100keys (5 turns each, all keys at once),
      100keys_200ms (one turn per key, all at once, the model answering after 200 ms). Each on a fresh
      workspace with the repository's workspace/ templates, 20 warm-up turns first (2 with the slow model),
      median of 3 runs (the gateway's 200 ms scenario, serialised by nanobot's lock, runs once).
      Every reply is checked, and the fake's request counter must grow by exactly one request per turn.

      Made equal to nanogate, to nanobot's advantage: loguru output is off (nanogate's bench has no log
      subscriber either), and nanobot's memory consolidation (an extra model call in the background once a
      session holds memory_window = 100 messages) is replaced by a no-op, as nanogate's is switched off with
      memory.enabled = false, so both send the same 100-message history window and make one model call per
      turn.

  report --nanogate NG.json [--nanobot NB.json] [--skipped REASON] [--strict]
      Prints the comparison table and the issue's targets (standard library only); --strict: exit 1 when a
      target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ANSWER = "Sure, noted. 👍"  # the fake's answer, as in benches/agent.rs
SLOW_MS = 200
WARMUP_TURNS = 20
REPO = Path(__file__).resolve().parent.parent
TEMPLATES = REPO / "workspace"


def user_text(i: int) -> str:
    """The user's text for turn i (the same as benches/agent.rs)."""
    return f"Message {i}: what is on my list for today? Please keep it short."


SCENARIOS = [
    # name, keys, turns per key, model delay (ms)
    ("1key", 1, 200, 0),
    ("100keys", 100, 5, 0),
    ("100keys_200ms", 100, 1, SLOW_MS),
]
QUICK = [("1key", 1, 10, 0), ("100keys", 100, 1, 0), ("100keys_200ms", 100, 1, SLOW_MS)]


# ---------------------------------------------------------------------------------------------------------------
# bench
# ---------------------------------------------------------------------------------------------------------------


class FakeServer:
    """The Rust fake (`BIN --serve-fake`), a child process that exits when its standard input closes."""

    def __init__(self, binary: str) -> None:
        self.proc = subprocess.Popen([binary, "--serve-fake"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        line = self.proc.stdout.readline().strip() if self.proc.stdout else ""
        if not line.startswith("http://"):
            self.close()
            raise SystemExit(f"the fake server did not start (said {line!r})")
        self.base = line  # http://127.0.0.1:PORT/v1
        self.root = line[: -len("/v1")]

    def url(self, delay_ms: int) -> str:
        return self.base if delay_ms == 0 else f"{self.root}/delay/{delay_ms}/v1"

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self.root}/stats", timeout=10) as r:
            return json.loads(r.read())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def fresh_workspace(root: Path) -> Path:
    ws = Path(tempfile.mkdtemp(prefix="nanobot-agent-bench-", dir=root))
    shutil.copytree(TEMPLATES, ws, dirs_exist_ok=True)
    return ws


async def run_scenario(mode: str, fake: FakeServer, root: Path, keys: int, turns: int, delay_ms: int) -> dict:
    from nanobot.agent.loop import AgentLoop
    from nanobot.bus.events import InboundMessage
    from nanobot.bus.queue import MessageBus
    from nanobot.providers.custom_provider import CustomProvider

    ws = fresh_workspace(root)
    provider = CustomProvider(api_key="bench-key", api_base=fake.url(delay_ms), default_model="fake-model")
    bus = MessageBus()
    loop = AgentLoop(bus=bus, provider=provider, workspace=ws, memory_window=100)

    async def no_consolidation(session, archive_all: bool = False) -> bool:
        return True

    loop._consolidate_memory = no_consolidation  # see the module docstring

    runner = dispatcher = None
    waiting: dict[str, asyncio.Future] = {}
    if mode == "gateway":
        runner = asyncio.create_task(loop.run())

        async def dispatch() -> None:
            while True:
                out = await bus.consume_outbound()
                if (out.metadata or {}).get("_progress"):
                    continue
                fut = waiting.pop(out.chat_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(out.content)

        dispatcher = asyncio.create_task(dispatch())

    async def turn(chat_id: str, i: int) -> None:
        text = user_text(i)
        if mode == "gateway":
            fut = asyncio.get_running_loop().create_future()
            waiting[chat_id] = fut
            await bus.publish_inbound(InboundMessage(channel="bench", sender_id="user", chat_id=chat_id,
                                                     content=text))
            reply = await fut
        else:
            reply = await loop.process_direct(text, session_key=f"bench:{chat_id}", channel="bench",
                                              chat_id=chat_id)
        if reply != ANSWER:
            raise SystemExit(f"unexpected reply from nanobot: {reply!r}")

    async def one_key(k: int) -> None:
        for i in range(turns):
            await turn(str(k), i)

    try:
        for i in range(WARMUP_TURNS if delay_ms == 0 else 2):
            await turn("warmup", i)
        before = fake.stats()["requests"]
        start = time.perf_counter()
        await asyncio.gather(*(one_key(k) for k in range(1, keys + 1)))
        wall = time.perf_counter() - start
        stats = fake.stats()
        calls = stats["requests"] - before
        if calls != keys * turns:
            raise SystemExit(f"nanobot made {calls} model calls for {keys * turns} turns")
    finally:
        if runner:
            loop.stop()
            runner.cancel()
        if dispatcher:
            dispatcher.cancel()
        await asyncio.gather(*(t for t in (runner, dispatcher) if t), return_exceptions=True)
        await provider._client.close()
        shutil.rmtree(ws, ignore_errors=True)
    return {"wall_s": wall, "turns": keys * turns, "peak_in_flight": stats["max_in_flight"]}


def cmd_bench(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="nanobot-agent-bench-home-"))
    os.environ["HOME"] = str(home)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from loguru import logger

    logger.remove()
    logger.disable("nanobot")
    import importlib.metadata as md

    version = md.version("nanobot-ai")
    root = Path(tempfile.mkdtemp(prefix="nanobot-agent-bench-", dir=os.environ.get("NANOGATE_AGENT_BENCH_TMP")))
    fake = FakeServer(args.fake_bin)
    results = []
    try:
        print(f"nanobot-ai {version}, Python {sys.version.split()[0]}, fake at {fake.base}")
        for name, keys, turns, delay in (QUICK if args.quick else SCENARIOS):
            for mode in ("gateway", "direct"):
                repeats = 1 if args.quick or (mode == "gateway" and delay > 0) else 3
                runs = [asyncio.run(run_scenario(mode, fake, root, keys, turns, delay)) for _ in range(repeats)]
                wall = statistics.median(r["wall_s"] for r in runs)
                n = runs[0]["turns"]
                peak = max(r["peak_in_flight"] for r in runs)
                r = {"scenario": name, "mode": mode, "keys": keys, "turns": n, "delay_ms": delay, "wall_s": wall,
                     "turns_per_s": n / wall, "peak_in_flight": peak, "repeats": repeats}
                results.append(r)
                if delay == 0:
                    print(f"{name:<14} {mode:<8} {n:>5} turns  {wall:8.3f} s  {n / wall:8.0f} turns/s  "
                          f"({wall * 1000 / n:.3f} ms/turn)", flush=True)
                else:
                    print(f"{name:<14} {mode:<8} {n:>5} turns  {wall:8.3f} s  = {wall * 1000 / delay:.2f} x "
                          f"{delay} ms model latency  (peak {peak} model calls at once)", flush=True)
    finally:
        fake.close()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
    Path(args.out).write_text(json.dumps({"nanobot": version, "python": sys.version.split()[0],
                                          "results": results}, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------

ROW_TITLES = {
    "1key": "1 key, instant model",
    "100keys": "100 keys, instant model",
    "100keys_200ms": "100 keys, 200 ms model, cap 100",
}


def cmd_report(args: argparse.Namespace) -> None:
    ng = {(r["scenario"], r["durability"]): r for r in json.loads(Path(args.nanogate).read_text())["results"]}
    nb: dict = {}
    nb_version = None
    if args.nanobot and Path(args.nanobot).exists():
        data = json.loads(Path(args.nanobot).read_text())
        nb_version = data.get("nanobot")
        nb = {(r["scenario"], r["mode"]): r for r in data["results"]}

    def cell(r: dict | None) -> str:
        if r is None:
            return "-"
        if r["delay_ms"] == 0:
            return f"{r['turns_per_s']:,.0f} turns/s"
        return f"{r['wall_s']:.3f} s ({r['wall_s'] * 1000 / r['delay_ms']:.2f}x)"

    head = ["scenario (turns)", "nanogate (fsync)", "nanogate (os)", "nanobot gateway", "nanobot direct",
            "ratio (os vs best nanobot)"]
    rows = []
    targets = []
    for name, title in ROW_TITLES.items():
        fs, os_, gw, di = ng.get((name, "fsync")), ng.get((name, "os")), nb.get((name, "gateway")), nb.get(
            (name, "direct"))
        turns = (os_ or fs or {}).get("turns", "?")
        best = None
        if gw or di:
            if name == "100keys_200ms":
                best = min((r for r in (gw, di) if r), key=lambda r: r["wall_s"])
            else:
                best = max((r for r in (gw, di) if r), key=lambda r: r["turns_per_s"])
        if os_ is None or best is None:
            ratio = "-"
        elif os_["delay_ms"] == 0:
            ratio = f"{os_['turns_per_s'] / best['turns_per_s']:.1f}x"
        else:
            ratio = f"{best['wall_s'] / os_['wall_s']:.1f}x faster"
        rows.append([f"{title} ({turns})", cell(fs), cell(os_), cell(gw), cell(di), ratio])
        if name == "1key" and os_ and best:
            r = os_["turns_per_s"] / best["turns_per_s"]
            targets.append(f"1 key: nanogate (os) / best nanobot = {r:.1f}x (target >= 20x): "
                           f"{'met' if r >= 20 else 'MISSED'}")
        if name == "100keys_200ms":
            for label, r in (("fsync", fs), ("os", os_)):
                if r:
                    x = r["wall_s"] * 1000 / r["delay_ms"]
                    targets.append(f"100 keys, 200 ms, cap 100, {label}: {r['wall_s'] * 1000:.0f} ms = {x:.2f}x "
                                   f"one model latency (target <= 2x): {'met' if x <= 2 else 'MISSED'}")
    widths = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    print()
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    print()
    if args.skipped:
        print(f"nanobot: SKIPPED ({args.skipped})")
    elif nb_version:
        print(f"nanobot-ai {nb_version}: gateway = AgentLoop.run() through its MessageBus; direct = process_direct().")
    for t in targets:
        print(t)
    if args.strict and any("MISSED" in t for t in targets):
        sys.exit(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--fake-bin", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--quick", action="store_true")
    r = sub.add_parser("report")
    r.add_argument("--nanogate", required=True)
    r.add_argument("--nanobot")
    r.add_argument("--skipped")
    r.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args()
    {"bench": cmd_bench, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    main()
