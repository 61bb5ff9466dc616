"""Where the installed CLI and its Python files are, and the environment it runs in.

The wheel (cmake/wheel.cmake) puts the CLI at ckptcheck/data/bin/ckptcheck and the Python files it runs (adapters,
report generator, catalogue) under ckptcheck/data. The console script `ckptcheck` is `main` here: it points the CLI
at that folder ($CKPT_SOURCE_DIR, the variable a source checkout uses) and at this interpreter for the adapters
($CKPT_PYTHON: the user's venv, where their framework and model are), then becomes the CLI (exec), so signals and
exit codes are the CLI's own. Either variable set beforehand wins.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"


class CkptcheckNotFound(RuntimeError):
    """The CLI is not where the package expects it."""


def binary() -> Path:
    """The CLI: $CKPT_BINARY (a build tree's build/bin/ckptcheck, for working on ckptcheck itself), else the
    installed one."""
    env = os.environ.get("CKPT_BINARY")
    path = Path(env) if env else DATA_DIR / "bin" / "ckptcheck"
    if not os.access(path, os.X_OK):
        raise CkptcheckNotFound(
            "ckptcheck's CLI is not at %s: install the package with pip (docs/python.md), or set CKPT_BINARY to a "
            "built ckptcheck" % path
        )
    return path


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The CLI's environment: `base` (default os.environ) with CKPT_SOURCE_DIR and CKPT_PYTHON filled in."""
    env = dict(os.environ if base is None else base)
    if not env.get("CKPT_SOURCE_DIR") and (DATA_DIR / "harness" / "adapters" / "common").is_dir():
        env["CKPT_SOURCE_DIR"] = str(DATA_DIR)
    if not env.get("CKPT_PYTHON"):
        env["CKPT_PYTHON"] = sys.executable
    return env


def main() -> None:
    try:
        exe = binary()
    except CkptcheckNotFound as e:
        print("ckptcheck: %s" % e, file=sys.stderr)
        sys.exit(3)
    os.execve(exe, [str(exe), *sys.argv[1:]], environment())
