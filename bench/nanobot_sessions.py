#!/usr/bin/env python3
"""Session-store benchmark, Python side: generates the session files and times nanobot's own SessionManager.

Subcommands:

  generate --out DIR [--sizes 100,10000,100000]
      Writes DIR/session-<N>.jsonl for each size: a nanobot session file for the key "telegram:42", written
      with plain json.dumps(obj, ensure_ascii=False) exactly as nanobot's SessionManager.save does. The content
      is deterministic (no randomness, no clock), and benches/sessions.rs has a byte-identical Rust copy of
      this generator that it falls back to when run without these files.

  bench --files DIR --out RESULTS.json [--sizes ...] [--budget SECONDS]
      Times nanobot-ai's SessionManager (needs nanobot importable, e.g. the venv bench/run.sh makes) on each
      file, in a temporary workspace:
        load       SessionManager.get_or_create() after invalidate(): the full read + json.loads of every line
        save_turn  add_message("user") + add_message("assistant") + SessionManager.save(): nanobot rewrites
                   the whole file after every turn (plain open/write, no fsync)
      Each measurement runs for about --budget seconds (at least 5 iterations) and records the median.

  report --nanobot RESULTS.json --criterion DIR [--files DIR]
      Prints the comparison table from nanobot's RESULTS.json and criterion's estimates (median) under DIR
      (criterion's output directory, CRITERION_HOME). Needs only the standard library.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

KEY = "telegram:42"
FILE_NAME = "telegram_42.jsonl"  # nanobot's name for KEY: ':' -> '_'
DEFAULT_SIZES = (100, 10_000, 100_000)

# ---------------------------------------------------------------------------------------------------------------
# Generator. Keep in step with benches/sessions.rs (same texts, same selection, same timestamps): the Rust bench
# checks that its copy produces the same bytes as these files when it is given them.
# ---------------------------------------------------------------------------------------------------------------

USER_TEXTS = [
    "Hi! Can you list the files in my workspace?",
    "Wie wird das Wetter morgen in München? Ich muss um 7:30 los und weiß nicht, ob ich das Rad nehmen kann.",
    "Remind me to call the dentist tomorrow at 9am, please.",
    "Peux-tu résumer le dernier article que je t'ai envoyé ? Surtout la partie sur les coûts énergétiques.",
    "明日の東京の天気を教えてください。傘は必要ですか？",
    "What's in notes/todo.md? I think I left a few open items there last week.",
    "Translate to Spanish: \"The meeting has been moved to Thursday afternoon.\"",
    "Привет! Напомни, пожалуйста, что я планировал на выходные?",
    "ok thanks 👍",
    "Write a short haiku about the sea, then save it to poems/sea.txt",
    "Can you check whether the backup script at ~/bin/backup.sh still uses rsync with --delete? "
    "I don't want it to wipe the NAS again.",
    "Was hast du gestern über die Stromrechnung herausgefunden? Die Nachzahlung kam mir zu hoch vor – 312,40 €.",
    "Forwarding this from Anna: \"Hi! For the trip: the train leaves München Hbf at 08:12 on Saturday, we "
    "change in Würzburg and arrive in Köln at 13:05. Can you bring the tent and the small gas stove? I'll take "
    "care of food for the first evening. Also, my cousin might join on Sunday – is that ok for you?\" Can you "
    "add the train times to my calendar and put the tent and the stove on my packing list?",
]

ASSISTANT_TEXTS = [
    "Here is what I found in your workspace:\n\n- `notes/` – 14 files, mostly meeting notes\n- `poems/` – 3 files\n"
    "- `bin/backup.sh` – the backup script\n- `HEARTBEAT.md` – your periodic tasks\n\nWant me to open any of them?",
    "Morgen in München: vormittags bewölkt, ab etwa 14 Uhr Regen, Höchstwert 11 °C. Um 7:30 ist es noch trocken, "
    "das Rad geht also – aber nimm sicherheitshalber eine Regenjacke mit. ☂️",
    "Done! I'll remind you tomorrow at 09:00 to call the dentist.",
    "Résumé : l'article compare le coût énergétique de l'entraînement et de l'inférence des grands modèles. "
    "Points clés :\n1. l'inférence dépasse l'entraînement après quelques mois d'usage ;\n2. le refroidissement "
    "représente 30 à 40 % de la consommation ;\n3. les auteurs recommandent des modèles plus petits et spécialisés.",
    "明日の東京は晴れのち曇り、降水確率は20%です。傘はたぶん要りませんが、折りたたみ傘があると安心です。",
    "Your todo list has 3 open items:\n- [ ] renew passport (due 12/03)\n- [ ] fix the \"flaky\" test in ci.yml\n"
    "- [ ] reply to Anna about the trip\n\nShould I mark any of them as done?",
    "\"La reunión se ha trasladado al jueves por la tarde.\"",
    "На выходные ты планировал: в субботу — велосипедная прогулка вдоль реки, в воскресенье — ужин у родителей в 18:00.",
    "You're welcome! 😊",
    "Saved to poems/sea.txt:\n\n    Grey waves fold and break\n    salt wind carries gull voices\n    the tide keeps its time",
    "Yes — line 12 still runs `rsync -a --delete /home/me/ /mnt/nas/backup/`. If the source path is ever empty, "
    "`--delete` would remove everything on the NAS. I'd suggest adding `--max-delete=100` or checking that the "
    "source exists first. Want me to patch it?",
    "Die Nachzahlung von 312,40 € ergibt sich aus 1.130 kWh Mehrverbrauch gegenüber dem Vorjahr (der Abschlag war "
    "zu niedrig angesetzt). Der Arbeitspreis ist mit 0,32 €/kWh korrekt abgerechnet.",
    "Here's a plan for the week, based on your calendar and the todo list:\n\n**Monday** – renew the passport "
    "online (takes ~20 min, you need the biometric photo from last year)\n**Tuesday** – fix the flaky test: it "
    "fails when the test runner's clock crosses midnight, so freezing the time in the fixture should be enough\n"
    "**Wednesday** – reply to Anna; she asked about the train times to Köln and whether you can bring the tent\n"
    "**Thursday** – meeting moved to the afternoon, keep the morning free for deep work\n**Friday** – backup "
    "check, and the NAS firmware update if the changelog looks safe\n\nShall I put these into your calendar "
    "as reminders?",
    "I looked through HISTORY.md for anything about the heating: on 3 October you noted that the thermostat in "
    "the living room resets to 16 °C every night at 02:00, and on 9 October the technician said the schedule "
    "was stored twice in the controller. Nothing after that, so it may still be open. Do you want me to add a "
    "reminder to call the landlord, or draft an e-mail to the technician describing the problem again?",
]

TOOLS = [
    ("list_dir", "{\"path\": \".\"}",
     "📁 archive\n📁 bin\n📁 memory\n📁 notes\n📁 photos\n📁 poems\n📁 projects\n📁 skills\n📄 AGENTS.md\n"
     "📄 HEARTBEAT.md\n📄 SOUL.md\n📄 TOOLS.md\n📄 USER.md\n📄 einkaufsliste.txt\n📄 packliste-köln.md\n"
     "📄 rezepte.md\n📄 steuer-2025.pdf\n📄 todo.md"),
    ("read_file", "{\"path\": \"notes/todo.md\"}",
     "# TODO\n\n- [ ] renew passport (due 12/03)\n- [x] buy cat food\n- [ ] fix the \"flaky\" test in ci.yml\n"
     "- [ ] reply to Anna about the trip\n- [x] book train to Köln\n- [x] return library books\n"
     "- [ ] ask the landlord about the thermostat (resets to 16 °C at night)\n- [ ] Steuererklärung: "
     "Belege für Arbeitszimmer sammeln\n- [x] cancel the old phone contract\n\n## Someday\n- learn to "
     "make ramen from scratch\n- repaint the balcony railing\n"),
    ("web_search", "{\"query\": \"Wetter M\\u00fcnchen morgen\", \"count\": 3}",
     "Results for: Wetter München morgen\n\n1. Wetter München – 14-Tage-Vorhersage\n   "
     "https://example.com/wetter/muenchen\n   Morgen: bewölkt, ab 14 Uhr Regen, 6–11 °C.\n2. München: Regen am "
     "Nachmittag\n   https://example.org/muenchen/regen\n   Niederschlagswahrscheinlichkeit 80 % ab 14 Uhr.\n"
     "3. Pollenflug und UV-Index\n   https://example.net/pollen\n   Geringe Belastung."),
    ("exec", "{\"command\": \"grep -n -C3 rsync ~/bin/backup.sh\"}",
     "9-# nightly backup to the NAS, started by cron at 02:30\n10-set -euo pipefail\n11-mount | grep -q "
     "/mnt/nas || exit 1\n12:rsync -a --delete /home/me/ /mnt/nas/backup/\n13-echo \"$(date -Is) backup ok\" "
     ">> ~/backup.log\n14-\n15-# TODO: prune old snapshots\n\nExit code: 0"),
    ("web_fetch", "{\"url\": \"https://example.com/articles/energy-cost-of-ai\", \"maxChars\": 5000}",
     "{\"url\": \"https://example.com/articles/energy-cost-of-ai\", \"status\": 200, \"extractor\": \"readability\", "
     "\"text\": \"# The energy cost of AI\\n\\nTraining a large model takes weeks on thousands of accelerators, "
     "but the bill does not stop there. Once deployed, every request costs energy again, and popular services "
     "answer billions of them. Our estimates suggest that inference overtakes training within months. Cooling "
     "adds 30 to 40 percent on top, depending on the climate and the data centre design. Smaller, specialised "
     "models cut the cost of a\n... (truncated)"),
    ("cron", "{\"action\": \"add\", \"message\": \"Call the dentist\", \"at\": \"2026-11-23T09:00:00\"}",
     "Created job 'Call the dentist' (id: 3f9c2a71)\nNext run: 2026-11-23 09:00 (Europe/Berlin)\nDelivery: "
     "telegram:42\nOther jobs: 'Heartbeat' every 30 min (id: 0b1e77d4), 'Wochenrückblick' Sundays 18:00 "
     "(id: 9d02c5ee)"),
]

# The turn appended by the append/save benchmark, on both sides.
TURN_USER = "Und übermorgen? Lohnt sich eine Radtour an den Starnberger See? 🚲"
TURN_ASSISTANT = (
    "Übermorgen wird es sonnig bei bis zu 14 °C, kaum Wind – gute Bedingungen für die Radtour. Plane für die "
    "knapp 30 km etwa zwei Stunden ein und nimm eine Jacke mit, am See ist es abends frisch."
)

BASE_TIME = dt.datetime(2026, 11, 22, 9, 50, 26, 226704)


def timestamp(i: int) -> str:
    """Message i's timestamp: 53 s apart plus a varying fraction, as datetime.isoformat() writes it."""
    t = BASE_TIME + dt.timedelta(seconds=53 * i, microseconds=(7919 * i) % 1_000_000)
    return t.isoformat()


def messages(n: int):
    """The first n messages: turns of user + assistant, two turns in three with a tool call in between."""
    count = 0
    turn = 0
    calls = 0
    while True:
        turn_msgs = [{"role": "user", "content": USER_TEXTS[(7 * turn + 3) % len(USER_TEXTS)]}]
        if turn % 3 != 0:
            name, args, result = TOOLS[calls % len(TOOLS)]
            call_id = "call_%08x" % ((turn * 2654435761) % 2**32)
            content = None if calls % 2 == 0 else "Let me check that for you."
            calls += 1
            turn_msgs.append({
                "role": "assistant",
                "content": content,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}],
            })
            turn_msgs.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": result})
        turn_msgs.append({"role": "assistant", "content": ASSISTANT_TEXTS[(5 * turn + 1) % len(ASSISTANT_TEXTS)]})
        for m in turn_msgs:
            if count == n:
                return
            m["timestamp"] = timestamp(count)
            yield m
            count += 1
        turn += 1


def last_consolidated(n: int) -> int:
    """Where nanobot's consolidation would have left the watermark (it keeps 50 to 100 messages unconsolidated)."""
    return 0 if n < 50 else (n - 50) // 50 * 50


def write_session(path: Path, n: int) -> None:
    header = {
        "_type": "metadata",
        "key": KEY,
        "created_at": timestamp(0),
        "updated_at": timestamp(max(n - 1, 0)),
        "metadata": {},
        "last_consolidated": last_consolidated(n),
    }
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header, ensure_ascii=False) + "\n")
        for m in messages(n):
            f.write(json.dumps(m, ensure_ascii=False) + "\n")


def session_file(files: Path, n: int) -> Path:
    return files / f"session-{n}.jsonl"


def cmd_generate(args) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for n in args.sizes:
        path = session_file(out, n)
        write_session(path, n)
        size = path.stat().st_size
        print(f"generated {path} ({n} messages, {size} bytes, {size / max(n, 1):.0f} bytes/message)")


# ---------------------------------------------------------------------------------------------------------------
# nanobot timing
# ---------------------------------------------------------------------------------------------------------------


def measure(step, budget: float, min_iters: int = 5, max_iters: int = 2000) -> dict:
    """Runs step() (which returns the seconds it measured) until the budget is spent; median and spread."""
    step()  # warm-up, untimed
    times = []
    started = time.perf_counter()
    while len(times) < max_iters and (len(times) < min_iters or time.perf_counter() - started < budget):
        times.append(step())
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "iters": len(times),
    }


def cmd_bench(args) -> None:
    files = Path(args.files)
    with tempfile.TemporaryDirectory(prefix="nanobot-bench-") as tmp:
        # SessionManager looks for a legacy ~/.nanobot/sessions file when a session file is missing; ours never
        # are, but point HOME at the temporary directory anyway so nothing can touch the user's home.
        os.environ["HOME"] = tmp
        from importlib.metadata import version

        from nanobot.session.manager import SessionManager

        results = {
            "nanobot_version": version("nanobot-ai"),
            "python": platform.python_version(),
            "load": {},
            "save_turn": {},
        }
        for n in args.sizes:
            src = session_file(files, n)
            if not src.exists():
                sys.exit(f"missing {src}: run `generate --out {files}` first")
            ws = Path(tmp) / f"ws-{n}"
            (ws / "sessions").mkdir(parents=True)
            shutil.copyfile(src, ws / "sessions" / FILE_NAME)
            sm = SessionManager(ws)
            session = sm.get_or_create(KEY)
            if len(session.messages) != n:
                sys.exit(f"nanobot loaded {len(session.messages)} messages from {src}, expected {n}")
            session = None

            def load() -> float:
                sm.invalidate(KEY)  # the previous session is freed here, outside the timed part
                t0 = time.perf_counter()
                sm.get_or_create(KEY)
                return time.perf_counter() - t0

            results["load"][str(n)] = measure(load, args.budget)
            print(f"nanobot load      {n:>7} messages: {results['load'][str(n)]['median_s'] * 1e3:10.3f} ms "
                  f"(median of {results['load'][str(n)]['iters']})", file=sys.stderr)

            session = sm.get_or_create(KEY)

            def save_turn() -> float:
                t0 = time.perf_counter()
                session.add_message("user", TURN_USER)
                session.add_message("assistant", TURN_ASSISTANT)
                sm.save(session)
                elapsed = time.perf_counter() - t0
                # Keep the session at n messages so every iteration saves n + 2 (the file is rewritten whole
                # each time, so nothing else needs resetting).
                del session.messages[-2:]
                return elapsed

            results["save_turn"][str(n)] = measure(save_turn, args.budget)
            print(f"nanobot save_turn {n:>7} messages: {results['save_turn'][str(n)]['median_s'] * 1e3:10.3f} ms "
                  f"(median of {results['save_turn'][str(n)]['iters']})", file=sys.stderr)
            session = None
            sm = None
            shutil.rmtree(ws)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------------------


def criterion_median(root: Path, bench_id: str) -> float | None:
    """Median time per iteration in seconds for a criterion benchmark id like 'session_load/load_file/10000'."""
    path = root.joinpath(*bench_id.split("/"), "new", "estimates.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))["median"]["point_estimate"] / 1e9
    except (OSError, KeyError, ValueError):
        return None


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.2f} µs"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.1f}x" if a / b >= 10 else f"{a / b:.2f}x"


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def verdict(ok: bool | None) -> str:
    if ok is False:
        failed.append(1)
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


failed: list[int] = []


def cmd_report(args) -> None:
    crit = Path(args.criterion)
    nb = {}
    if args.nanobot and Path(args.nanobot).exists():
        nb = json.loads(Path(args.nanobot).read_text(encoding="utf-8"))
    sizes = args.sizes

    def nb_time(kind: str, n: int) -> float | None:
        r = nb.get(kind, {}).get(str(n))
        return r["median_s"] if r else None

    def cm(bench_id: str) -> float | None:
        return criterion_median(crit, bench_id)

    print()
    print("Session store benchmarks: median time per operation, both sides on the same generated files")
    if nb:
        print(f"  nanobot:  nanobot-ai {nb.get('nanobot_version')} SessionManager, Python {nb.get('python')}")
    else:
        print("  nanobot:  SKIPPED (no nanobot results)")
    print("  nanogate: criterion (benches/sessions.rs), release build")
    if args.files:
        files = Path(args.files)
        sizes_txt = ", ".join(
            f"{n} msgs = {session_file(files, n).stat().st_size / 1e6:.2f} MB"
            for n in sizes if session_file(files, n).exists()
        )
        print(f"  files:    {sizes_txt}")

    print()
    print("LOAD a session file")
    print("  nanobot       SessionManager.get_or_create() after invalidate(): json.loads of every line")
    print("  load_file     nanogate load_file(): read, split, validate every line, parse line 1")
    print("  deferred      load_file_deferred(), the store's load: message lines checked at the first write")
    print("  +history      load_file_deferred() then history(500), the window a turn sends to the model")
    print("  store.get     SessionStore::get() after invalidate(): the gateway's cache-miss path (deferred)")
    rows = []
    for n in sizes:
        lf = cm(f"session_load/load_file/{n}")
        sg = cm(f"session_load/store_get/{n}")
        nbl = nb_time("load", n)
        rows.append([
            str(n), fmt_time(nbl), fmt_time(lf), fmt_time(cm(f"session_load/load_file_deferred/{n}")),
            fmt_time(cm(f"session_load/load_file_deferred+history500/{n}")), fmt_time(sg),
            fmt_ratio(nbl, lf), fmt_ratio(nbl, sg),
        ])
    print(table(rows, ["messages", "nanobot", "load_file", "deferred", "+history", "store.get",
                       "nanobot/load_file", "nanobot/store.get"]))

    print()
    print("APPEND one turn (user + assistant message) and save it")
    print("  nanobot       add_message() x2 + SessionManager.save(): rewrites the whole file, no fsync")
    print("  Os            nanogate add_message() x2 + commit: appends 2 lines, patches line 1 in place, no fsync")
    print("                (the like-for-like comparison with nanobot)")
    print("  Fsync         the same with durability = fsync (nanogate's default): sync_data before returning")
    print("  Os 1st        Os, the first turn right after the store loaded the session (pays the deferred check)")
    rows = []
    for n in sizes:
        nbs = nb_time("save_turn", n)
        os_ = cm(f"session_append_turn/os/{n}")
        fs = cm(f"session_append_turn/fsync/{n}")
        first = cm(f"session_append_turn/os_first_after_load/{n}")
        rows.append([str(n), fmt_time(nbs), fmt_time(os_), fmt_time(fs), fmt_time(first), fmt_ratio(nbs, os_),
                     fmt_ratio(nbs, fs)])
    print(table(rows, ["messages", "nanobot", "Os", "Fsync", "Os 1st", "nanobot/Os", "nanobot/Fsync"]))

    lo, hi = min(sizes), max(sizes)
    print()
    print("TARGETS")
    load_n = 10_000 if 10_000 in sizes else hi
    lf = cm(f"session_load/load_file/{load_n}")
    nbl = nb_time("load", load_n)
    ok = None if lf is None or nbl is None else nbl / lf >= 20
    rows = [[f"load {load_n}: nanobot / load_file (all lines checked)", fmt_ratio(nbl, lf), ">= 20x", verdict(ok)]]
    sg = cm(f"session_load/store_get/{load_n}")
    ok = None if sg is None or nbl is None else nbl / sg >= 20
    rows.append([f"load {load_n}: nanobot / store.get (deferred check)", fmt_ratio(nbl, sg), ">= 20x", verdict(ok)])
    for mode, label in (("os", "Os"), ("fsync", "Fsync")):
        a_lo = cm(f"session_append_turn/{mode}/{lo}")
        a_hi = cm(f"session_append_turn/{mode}/{hi}")
        ok = None if a_lo is None or a_hi is None else a_hi / a_lo <= 2
        rows.append([f"append, nanogate {label}: @{hi} / @{lo}", fmt_ratio(a_hi, a_lo), "<= 2x", verdict(ok)])
    first = cm(f"session_append_turn/os_first_after_load/{load_n}")
    nbs = nb_time("save_turn", load_n)
    miss = None if sg is None or first is None else sg + first
    both = None if nbl is None or nbs is None else nbl + nbs
    rows.append([f"(info) cache miss + 1 turn @{load_n}: nanobot load+save / store.get+Os 1st",
                 fmt_ratio(both, miss), "", ""])
    rows.append([f"(info) append, nanogate Os 1st: @{hi} / @{lo}",
                 fmt_ratio(cm(f"session_append_turn/os_first_after_load/{hi}"),
                           cm(f"session_append_turn/os_first_after_load/{lo}")), "", ""])
    rows.append([f"(info) save, nanobot: @{hi} / @{lo}",
                 fmt_ratio(nb_time("save_turn", hi), nb_time("save_turn", lo)), "", ""])
    print(table(rows, ["target", "measured", "goal", "result"]))
    if args.strict and failed:
        sys.exit(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    def sizes(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    g = sub.add_parser("generate")
    g.add_argument("--out", required=True)
    g.add_argument("--sizes", type=sizes, default=list(DEFAULT_SIZES))
    b = sub.add_parser("bench")
    b.add_argument("--files", required=True)
    b.add_argument("--out", required=True)
    b.add_argument("--sizes", type=sizes, default=list(DEFAULT_SIZES))
    b.add_argument("--budget", type=float, default=3.0, help="seconds per measurement (at least 5 iterations)")
    r = sub.add_parser("report")
    r.add_argument("--criterion", required=True, help="criterion's output directory (CRITERION_HOME)")
    r.add_argument("--nanobot", help="results written by `bench`")
    r.add_argument("--files", help="directory of the generated files (for their sizes)")
    r.add_argument("--sizes", type=sizes, default=list(DEFAULT_SIZES))
    r.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = p.parse_args()
    {"generate": cmd_generate, "bench": cmd_bench, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    main()
