#!/usr/bin/env python3
"""Make (or reuse) a venv with nanobot's classic session manager, for the interop test.

    python3 tests/interop/make_venv.py DIR

Prints the venv's python on the last line of stdout. If the package index cannot be reached, prints
`SKIPPED: <reason>` instead and exits 0, so a machine without network still runs the rest of the suite.
Only `nanobot-ai==0.1.4.post3` and `loguru` are installed (`--no-deps`): that is all
`nanobot.session.manager` imports, about 28 MB.
"""

import subprocess
import sys
import venv
from pathlib import Path

PACKAGES = ["nanobot-ai==0.1.4.post3", "loguru"]


def main() -> int:
    target = Path(sys.argv[1]).resolve()
    python = target / "bin" / "python"
    marker = target / ".installed"
    if marker.exists() and marker.read_text() == " ".join(PACKAGES) and python.exists():
        print(python)
        return 0
    try:
        if not python.exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(target)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", *PACKAGES],
            check=True,
            timeout=600,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        subprocess.run([str(python), "-c", "import nanobot.session.manager"], check=True, capture_output=True)
    except subprocess.CalledProcessError as e:
        err = (e.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        print(f"SKIPPED: could not install {' '.join(PACKAGES)}: {err[-1] if err else e}")
        return 0
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"SKIPPED: could not create the interop venv in {target}: {e}")
        return 0
    marker.write_text(" ".join(PACKAGES))
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
