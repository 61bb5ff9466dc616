#!/usr/bin/env python3
"""Every example setup whose verdict CTest pins (tests/CMakeLists.txt and the files it includes, tests/*.cmake:
`${EXAMPLES}/FILE.py:FACTORY` for PyTorch, `add_compiled_test(NAME FACTORY ...)` for examples/torch/compiled.py,
`${JAX_EXAMPLES}/FILE.py:FACTORY` for JAX, listed as jax:FILE.py:FACTORY) is also run by ci/main for the report's
"Your own models" table (plain vs checkpointed step time and saved bytes,
measured in the same run), and ci/main runs no setup that CTest does not pin: issue 14 asks for both of every real
client. Usage: user_model_setups.py SOURCE_DIR; exit 1 naming the setups missing on either side."""

import re
import sys
from pathlib import Path

# Setups CTest pins as bad input (exit 3, no verdict): nothing of theirs can go into the report's table.
NOT_REPORTED = {"compiled.py:uncompilable"}


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
        for var, file, factory in re.findall(
            r"\$\{(EXAMPLES|JAX_EXAMPLES)\}/(\$\{\w+\}|\w+)\.py:(\$\{\w+\}|\w+)", line
        ):
            files = loops.get(file[2:-1], []) if file.startswith("${") else [file]
            factories = loops.get(factory[2:-1], []) if factory.startswith("${") else [factory]
            prefix = "jax:" if var == "JAX_EXAMPLES" else ""
            out.update(f"{prefix}{f}.py:{g}" for f in files for g in factories if not g.startswith("${"))
        m = re.match(r"\s*add_compiled_test\(\S+\s+([\w${}]+)", line)
        if m:
            out.update(f"compiled.py:{g}" for g in expand(m.group(1), loops))
    return out - NOT_REPORTED


def expand(token, loops):
    """A token with `${VAR}` inside (`memory_budget_${b}`), one string per value of the enclosing foreach."""
    m = re.search(r"\$\{(\w+)\}", token)
    if not m:
        return [token]
    return [x for v in loops.get(m.group(1), []) for x in expand(token.replace(m.group(0), v, 1), loops)]


def reported(ci_main_text):
    """The setups of ci/main's `for setup in ...; do` loop, and the models of its plan loop (`for m in ...; do`,
    each model's `plan` factory)."""
    m = re.search(r"for setup in (.*?); do", ci_main_text, re.S)
    if not m:
        raise SystemExit("ci/main: no `for setup in ...; do` loop of example setups")
    out = set(m.group(1).replace("\\\n", " ").split())
    jax = re.search(r"for jsetup in (.*?); do", ci_main_text, re.S)
    if jax:
        out.update("jax:" + s for s in jax.group(1).replace("\\\n", " ").split())
    plans = re.search(r"for m in (.*?); do", ci_main_text, re.S)
    if plans:
        out.update(f"{model}.py:plan" for model in plans.group(1).split())
    return out


def main():
    root = Path(sys.argv[1])
    ctest = pinned(
        "\n".join(p.read_text() for p in [root / "tests" / "CMakeLists.txt", *sorted((root / "tests").glob("*.cmake"))])
    )
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
