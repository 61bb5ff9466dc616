"""report.md: the report's blocks (make_report.document) as Markdown, in the same order as the HTML page
(report_html.py)."""

from __future__ import annotations

from . import report_html
from .report_format import DocBlock
from .report_tables import md_table


def markdown_lines(blocks: list[DocBlock]) -> list[str]:
    """The blocks as Markdown lines, a details block's folded blocks inside its <details>."""
    md = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            md += ["#" * int(kind[1]) + " " + block[1], ""]
        elif kind == "p":
            md += [block[1], ""]
        elif kind == "ul":
            md += [f"- {item}" for item in block[1]] + [""]
        elif kind == "table":
            md += [md_table(block[1], block[2]), ""]
        elif kind == "figure":
            name, title, caption = block[1:4]
            heading = [f"### {title}", ""] if len(block) < 6 or block[5] else []
            md += heading + [f"![{title}]({name}.svg)", "", caption, ""]
        elif kind == "details":
            # GitHub and GitLab render HTML's <details> in Markdown; the blank lines let the Markdown inside render.
            md += [f"<details><summary>{report_html.inline_html(block[1])}</summary>", ""]
            md += markdown_lines(block[2]) + ["</details>", ""]
    return md


def render(blocks: list[DocBlock]) -> str:
    """The report's blocks (document) as report.md's text."""
    return "\n".join(markdown_lines(blocks))
