#!/usr/bin/env python3
"""nanobot's side of the interop test: real `nanobot.session.manager.SessionManager` (nanobot-ai 0.1.4.post3).

    nanobot_side.py write WORKSPACE SPEC.json      create sessions with nanobot from a spec
    nanobot_side.py read  WORKSPACE KEYS.json      load sessions with nanobot and report what it sees

SPEC.json: {"sessions": [{"key", "created_at", "metadata", "last_consolidated",
                           "turns": [{"messages": [{"role", "content", "extra": {...}}], "updated_at"}]}]}
Each turn's messages are added with `Session.add_message(role, content, **extra)` (extra carries the fixed
`timestamp`), `updated_at` is set, and the session is saved. After the first turn, the file is copied to
`<file>.turn1` so the Rust side can replay the remaining turns on nanobot's own bytes.

`read` prints JSON: {key: {"count", "last_consolidated", "history": get_history(), "history6":
get_history(max_messages=6), "resave_identical": bool}}. `resave_identical` says whether nanobot, saving
the session it loaded (with `updated_at` taken from line 1, which nanobot's loader ignores), writes exactly
the bytes of the file it read.
"""

import json
import os
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path

# nanobot also looks for legacy sessions under ~/.nanobot: keep it out of the user's home.
os.environ["HOME"] = tempfile.mkdtemp(prefix="nanogate-interop-home-")

from nanobot.session.manager import SessionManager  # noqa: E402


def write(ws: Path, spec: dict) -> None:
    sm = SessionManager(ws)
    for s_spec in spec["sessions"]:
        s = sm.get_or_create(s_spec["key"])
        s.created_at = datetime.fromisoformat(s_spec["created_at"])
        s.metadata = s_spec["metadata"]
        for i, turn in enumerate(s_spec["turns"]):
            for m in turn["messages"]:
                s.add_message(m["role"], m["content"], **m["extra"])
            s.updated_at = datetime.fromisoformat(turn["updated_at"])
            s.last_consolidated = min(s_spec["last_consolidated"], len(s.messages))
            sm.save(s)
            if i == 0:
                path = sm._get_session_path(s.key)
                shutil.copyfile(path, str(path) + ".turn1")


def read(ws: Path, keys: list) -> dict:
    out = {}
    for key in keys:
        sm = SessionManager(ws)
        s = sm.get_or_create(key)
        path = sm._get_session_path(key)
        original = path.read_bytes()
        header = json.loads(original.split(b"\n", 1)[0])
        s.updated_at = datetime.fromisoformat(header["updated_at"])
        with tempfile.TemporaryDirectory() as tmp:
            other = SessionManager(Path(tmp))
            other.save(s)
            resaved = other._get_session_path(key).read_bytes()
        out[key] = {
            "count": len(s.messages),
            "last_consolidated": s.last_consolidated,
            "history": s.get_history(),
            "history6": s.get_history(max_messages=6),
            "resave_identical": resaved == original,
        }
    return out


def main() -> None:
    cmd, ws, arg = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    data = json.loads(arg.read_text(encoding="utf-8"))
    if cmd == "write":
        write(ws, data)
    elif cmd == "read":
        sys.stdout.write(json.dumps(read(ws, data), ensure_ascii=False))
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
