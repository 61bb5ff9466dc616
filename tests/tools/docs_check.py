#!/usr/bin/env python3
"""The documentation holds together (CTest `docs_links`): every relative link of every Markdown file in the
repository (README.md, docs/*.md, ARCHITECTURE.md and the rest, build folders aside) names a file or folder that
exists, and a `#anchor` names a heading of the linked Markdown file, slugged as GitHub slugs it; README.md is one
screen, at most 120 lines; and the README's quick-start factory is examples/torch/quickstart.py verbatim, whose
verdict CTest pins (user_model_quickstart_batchnorm_twice), so the output the README shows stays that file's.
With --ckptcheck BIN, every option a Markdown file gives a subcommand (`ckptcheck SUB ... --flag` anywhere, or a
code span `SUB --flag ...`) is one that `BIN SUB --help` lists, as tests/ci_examples_test.cpp checks ci/examples/.

  docs_check.py SOURCE_DIR [--ckptcheck BIN]    check the tree; exit 1 naming each problem as FILE:LINE: what
  docs_check.py --self-test [--ckptcheck BIN]   check the checker on a small tree with known problems
"""

import argparse
import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

README_MAX_LINES = 120
# (Markdown file, the code block's language, the file whose text after its module docstring the block must be)
MIRRORS = [("README.md", "python", "examples/torch/quickstart.py")]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text):
    """(line number, line) of every line outside fenced and indented code blocks."""
    fence, prev_blank = None, True
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        indented = line.startswith("    ") or line.startswith("\t")
        if indented and prev_blank:  # an indented code block starts after a blank line and goes on while indented
            continue
        prev_blank = not line.strip()
        yield n, line


def slug(heading):
    """GitHub's anchor for a heading: the rendered text lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    """Every anchor of a Markdown file: its headings' slugs (a repeated one numbered -1, -2, ...) and HTML ids."""
    seen, out = {}, set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if m:
            s = slug(m.group(2))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
        out.update(HTML_ID.findall(line))
    return frozenset(out)


def links(text):
    """(line number, target) of every link and image outside code."""
    for n, line in prose_lines(text):
        m = REF_DEF.match(line)
        if m:
            yield n, m.group(1)
            continue
        for target in INLINE_LINK.findall(CODE_SPAN.sub("", line)):
            yield n, target


def check_link(root, md, target):
    """None when the link resolves, else what is wrong."""
    if not target or SCHEME.match(target) or target.startswith("//"):
        return None  # an external address: not checked here (no network)
    path, _, anchor = target.partition("#")
    path = unquote(path)
    dest = md if not path else ((root / path.lstrip("/")) if path.startswith("/") else (md.parent / path))
    dest = Path(os.path.normpath(dest))
    if not dest.is_relative_to(root):
        return f"link '{target}' leaves the repository"
    if not dest.exists():
        return f"link '{target}': no such file or folder ({dest.relative_to(root)})"
    if anchor:
        if dest.suffix.lower() != ".md" or not dest.is_file():
            return f"link '{target}': an anchor into something that is not a Markdown file"
        if anchor.lower() not in anchors(dest):
            return f"link '{target}': {dest.relative_to(root)} has no heading with the anchor #{anchor}"
    return None


class Options:
    """The options of each ckptcheck subcommand, from the binary's --help."""

    def __init__(self, binary):
        top = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
        names = re.findall(r"^  ([a-z][\w-]*)\s", top.split("Subcommands:", 1)[1], re.M)
        self.binary, self.checked = binary, 0
        subs = "|".join(map(re.escape, names))
        self.command = re.compile(r"ckptcheck\s+(" + subs + r")\b([^`\n]*)")  # to the end of a line or code span
        self.span = re.compile(r"`(" + subs + r")(\s+--[^`]*)`")

    def unknown(self, line):
        """(subcommand, option) of each option the line gives a subcommand that its --help does not list."""
        for sub, rest in self.command.findall(line) + self.span.findall(line):
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest):
                self.checked += 1
                if flag not in self.flags(sub):
                    yield sub, flag

    @functools.lru_cache(maxsize=None)  # noqa: B019 (one checker per run: the cache lives as long as the process)
    def flags(self, sub):
        out = subprocess.run([self.binary, sub, "--help"], capture_output=True, text=True, check=True).stdout
        return frozenset(re.findall(r"^\s+(?:-\w,)?(--[\w-]+)", out, re.M))


def markdown_files(root):
    """The tracked and untracked-but-not-ignored *.md files; without git, every *.md outside build folders."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "--", "*.md"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        files = [root / f for f in out if f]
        if files:
            return sorted(f for f in files if f.is_file())
    except (OSError, subprocess.CalledProcessError):
        pass
    skip = re.compile(r"^(\.|build|out$|validate-out$|gpu-out$)")
    found = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not skip.match(x)]
        found += [Path(d) / n for n in names if n.endswith(".md")]
    return sorted(found)


def code_blocks(text, lang):
    blocks, cur, fence = [], None, None
    for line in text.splitlines():
        m = FENCE.match(line)
        if cur is None and m and m.group(2) == lang:
            cur, fence = [], m.group(1)
        elif cur is not None and m and m.group(1).startswith(fence[0] * len(fence)) and not m.group(2):
            blocks.append("\n".join(cur) + "\n")
            cur = None
        elif cur is not None:
            cur.append(line)
    return blocks


def after_docstring(source):
    m = re.match(r'\s*(""".*?"""|\'\'\'.*?\'\'\')\n', source, re.S)
    return source[m.end() :] if m else source


def check(root, options=None):
    problems = []
    files = markdown_files(root)
    for md in files:
        text = md.read_text(encoding="utf-8")
        for n, target in links(text):
            why = check_link(root, md, target)
            if why:
                problems.append(f"{md.relative_to(root)}:{n}: {why}")
        for n, line in enumerate(text.splitlines(), 1) if options else []:
            for sub, flag in options.unknown(line):
                problems.append(
                    f"{md.relative_to(root)}:{n}: `ckptcheck {sub}` has no option {flag} (ckptcheck {sub} --help)"
                )
    readme = root / "README.md"
    if not readme.is_file():
        problems.append("README.md: missing")
    else:
        lines = len(readme.read_text(encoding="utf-8").splitlines())
        if lines > README_MAX_LINES:
            problems.append(
                f"README.md: {lines} lines, more than one screen ({README_MAX_LINES}); move the rest to docs/"
            )
    for md, lang, source in MIRRORS:
        if not (root / md).is_file():
            continue
        want = after_docstring((root / source).read_text(encoding="utf-8")) if (root / source).is_file() else None
        blocks = code_blocks((root / md).read_text(encoding="utf-8"), lang)
        if want is None:
            problems.append(f"{md}: shows {source}, which does not exist")
        elif want not in blocks:
            problems.append(
                f"{md}: no ```{lang} block equals {source} (after its docstring): update one from "
                f"the other, and the output the README shows with it"
            )
    return files, problems


def self_test(options):
    """The checker on a tree with one of each problem it must report, and links it must accept."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d).resolve()
        (root / "docs").mkdir()
        (root / "examples" / "torch").mkdir(parents=True)
        (root / "examples" / "torch" / "quickstart.py").write_text('"""Doc."""\nx = 1\n')
        (root / "docs" / "a.md").write_text(
            "# Page A\n\n## Run it: `--flag`, twice\n\n## Run it: `--flag`, twice\n\n"
            "[ok](../README.md) [ok anchor](#run-it---flag-twice) [ok dup](#run-it---flag-twice-1)\n"
            "[ok dir](../examples/) [web](https://example.org/x.md) ![img](../README.md)\n"
            "`[in code](nowhere.md)`\n\n    [indented code](nowhere.md)\n\n```\n[fenced](nowhere.md)\n```\n"
            "[bad file](missing.md)\n[bad anchor](a.md#no-such-heading)\n[ref]: ../nope/\n"
            "[escapes](../../outside.md)\n"
            "`ckptcheck plan --layers 4 --no-such-flag` and `verify --cases 3 --made-up`,\n"
            "but `plan --layers` and `ckptcheck run --case c.json --policy uniform` are fine\n"
        )
        (root / "README.md").write_text(
            "# R\n[a](docs/a.md#page-a)\n```python\nx = 2\n```\n" + "line\n" * README_MAX_LINES
        )
        _, problems = check(root, options)
        expected = [
            "missing.md",
            "#no-such-heading",
            "'../nope/'",
            "leaves the repository",
            "lines, more than",
            "no ```python block equals",
        ]
        if options:
            expected += ["no option --no-such-flag", "no option --made-up"]
        missed = [e for e in expected if not any(e in p for p in problems)]
        wrong = [p for p in problems if not any(e in p for e in expected)]
        for p in problems:
            print(f"  reported: {p}")
        if missed or wrong or len(problems) != len(expected):
            print(f"self-test FAILED: missed {missed}, reported wrongly {wrong}")
            return 1
        print(f"self-test: the {len(expected)} planted problems reported, the good links accepted")
        return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source_dir", nargs="?")
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--ckptcheck", help="the ckptcheck binary, whose --help the options are checked against")
    a = p.parse_args()
    options = Options(a.ckptcheck) if a.ckptcheck else None
    if a.self_test:
        return self_test(options)
    if not a.source_dir:
        p.error("SOURCE_DIR or --self-test")
    root = Path(a.source_dir).resolve()
    files, problems = check(root, options)
    for p in problems:
        print(p)
    count = sum(1 for md in files for _ in links(md.read_text(encoding="utf-8")))
    readme_lines = len((root / "README.md").read_text(encoding="utf-8").splitlines())
    checked = f", {options.checked} options checked against --help" if options else ""
    print(
        f"{len(files)} Markdown files, {count} links{checked}: {len(problems)} problem(s); README.md "
        f"{readme_lines} lines"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
