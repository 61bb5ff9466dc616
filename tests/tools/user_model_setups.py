#!/usr/bin/env python3
"""Every example PyTorch setup whose verdict CTest pins (tests/CMakeLists.txt, `${EXAMPLES}/FILE.py:FACTORY`) is
also run by ci/main for the report's "Your own models" table (plain vs checkpointed step time and saved bytes,
measured in the same run), and ci/main runs no setup that CTest does not pin: issue 14 asks for both of every real
client. Usage: user_model_setups.py SOURCE_DIR; exit 1 naming the setups missing on either side."""
import re
import sys
from pathlib import Path


def pinned(cmake_text):
    """FILE.py:FACTORY of every test on an example, a foreach's `${VAR}` expanded (the verdict loops over factories,
    `foreach(f ...)`, and the plan loop over models, `foreach(m ...)`)."""
    out, loops = set(), {}
    for line in cmake_text.splitlines():
        m = re.match(r"\s*foreach\((\w+)\s+([^)]*)\)", line)
        if m:
            loops[m.group(1)] = m.group(2).split()
        elif re.match(r"\s*endforeach\(", line):
            loops = {}
        for file, factory in re.findall(r"\$\{EXAMPLES\}/(\$\{\w+\}|\w+)\.py:(\$\{\w+\}|\w+)", line):
            files = loops.get(file[2:-1], []) if file.startswith("${") else [file]
            factories = loops.get(factory[2:-1], []) if factory.startswith("${") else [factory]
            out.update(f"{f}.py:{g}" for f in files for g in factories)
    return out


def reported(ci_main_text):
    """The setups of ci/main's `for setup in ...; do` loop, and the models of its plan loop (`for m in ...; do`,
    each model's `plan` factory)."""
    m = re.search(r"for setup in (.*?); do", ci_main_text, re.S)
    if not m:
        raise SystemExit("ci/main: no `for setup in ...; do` loop of example setups")
    out = set(m.group(1).replace("\\\n", " ").split())
    plans = re.search(r"for m in (.*?); do", ci_main_text, re.S)
    if plans:
        out.update(f"{model}.py:plan" for model in plans.group(1).split())
    return out


def main():
    root = Path(sys.argv[1])
    ctest = pinned((root / "tests" / "CMakeLists.txt").read_text())
    ci = reported((root / "ci" / "main").read_text())
    if len(ctest) < 10:
        print(f"only {len(ctest)} pinned example setups found in tests/CMakeLists.txt: the parser is out of date")
        return 1
    bad = 0
    for s in sorted(ctest - ci):
        print(f"{s}: verdict pinned in CTest, but ci/main does not run it for the report's table")
        bad = 1
    for s in sorted(ci - ctest):
        print(f"{s}: in ci/main's report table, but no CTest pins its verdict")
        bad = 1
    if not bad:
        print(f"{len(ctest)} example setups: each pinned in CTest and in the report's table")
    return bad


if __name__ == "__main__":
    sys.exit(main())
