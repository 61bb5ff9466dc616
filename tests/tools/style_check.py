#!/usr/bin/env python3
"""The tree's layout, as CI checks it: style_check.py python|cpp SOURCE_DIR.
  python: `ruff check` and `ruff format --check` (pyproject.toml's settings) over every Python file;
  cpp:    `clang-format --dry-run -Werror` (.clang-format) over every tracked C++ and CUDA source.
Both tools are pinned in ci/setup-python and run from the venv the adapters use; without it the check skips
(exit 77) when CKPT_SKIP_FRAMEWORK_TESTS=1 and fails with the hint otherwise, as the framework tests do. A finding
prints the tool's own lines (file, line, what) and the command that fixes it."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "adapters"))
from check_validate import adapter_python, require_python_modules  # noqa: E402

CPP_SUFFIXES = (".cpp", ".h", ".cu", ".cuh")


def cpp_files(root: str) -> list[str]:
    """Tracked C++/CUDA files; outside a git checkout, every one below root but build folders."""
    r = subprocess.run(["git", "ls-files", "-z", "--"] + ["*" + s for s in CPP_SUFFIXES], cwd=root, capture_output=True)
    if r.returncode == 0:
        return [f for f in r.stdout.decode().split("\0") if f]
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(("build", ".")) and x != "__pycache__"]
        found += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(CPP_SUFFIXES)]
    return sorted(found)


def run(cmd: list[str], root: str) -> int:
    print("$ " + " ".join(cmd[:4]) + (" ..." if len(cmd) > 4 else ""), flush=True)
    return subprocess.run(cmd, cwd=root).returncode


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("python", "cpp"):
        print("usage: style_check.py python|cpp SOURCE_DIR", file=sys.stderr)
        return 2
    what, root = sys.argv[1], sys.argv[2]
    py = adapter_python()
    if what == "python":
        require_python_modules(["ruff"])
        rc = run([py, "-m", "ruff", "check", "--no-cache", "."], root)
        rc = run([py, "-m", "ruff", "format", "--check", "--no-cache", "."], root) or rc
        fix = "ruff check --fix . && ruff format ."
    else:
        require_python_modules(["clang_format"])
        files = cpp_files(root)
        rc = run([py, "-c", "import clang_format; clang_format.clang_format()", "--dry-run", "-Werror"] + files, root)
        print("%d C++/CUDA files checked" % len(files))
        fix = "clang-format -i $(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')"
    if rc != 0:
        print(
            "style_check: the %s layout differs from the configured one; fix with (the venv's tools): %s" % (what, fix)
        )
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
