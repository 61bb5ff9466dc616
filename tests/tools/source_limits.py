#!/usr/bin/env python3
"""The size limits ARCHITECTURE.md promises, checked on the source tree: no non-test source file over 600 lines,
no function over 120 lines. Function lengths come from lizard (PyPI, pinned in ci/setup-python), which parses
C++, CUDA and Python; this script re-runs itself under the project's venv when the running Python lacks it.

usage: source_limits.py SOURCE_DIR
"""

import os
import subprocess
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
# Non-test code: what ships in the binary, the adapters, the report and the benchmarks.
CHECKED = ["reference", "device", "cases", "harness", "bench", "reports", "examples"]
SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".py")


def venv_python():
    if os.environ.get("CKPT_PYTHON"):
        return os.environ["CKPT_PYTHON"]
    return os.path.join(os.path.expanduser("~"), ".cache", "ckptcheck", "venv", "bin", "python")


def sources(root):
    for top in CHECKED:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith(SUFFIXES):
                    yield os.path.join(d, n)


def main():
    if len(sys.argv) != 2:
        print("usage: source_limits.py SOURCE_DIR")
        return 2
    try:
        import lizard
    except ImportError:
        py = venv_python()
        if os.environ.get("CKPT_LIMITS_REEXEC") or not os.path.exists(py):
            print("FAIL: %s cannot import lizard: run ci/setup-python (or set CKPT_PYTHON)" % sys.executable)
            return 1
        env = dict(os.environ, CKPT_LIMITS_REEXEC="1")
        return subprocess.run([py, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode
    root = sys.argv[1]
    problems = []
    files = list(sources(root))
    for path in files:
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_FILE_LINES:
            problems.append("%s: %d lines (limit %d)" % (rel, n, MAX_FILE_LINES))
        for fn in lizard.analyze_file(path).function_list:
            if fn.length > MAX_FUNCTION_LINES:
                problems.append(
                    "%s:%d: function %s is %d lines (limit %d)"
                    % (rel, fn.start_line, fn.long_name, fn.length, MAX_FUNCTION_LINES)
                )
    for p in problems:
        print("FAIL: " + p)
    if not problems:
        print(
            "ok: %d files, none over %d lines, no function over %d lines"
            % (len(files), MAX_FILE_LINES, MAX_FUNCTION_LINES)
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
