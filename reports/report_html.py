"""The overhead report as HTML: the page's style, the inline Markdown it renders, tables and the page itself from
the blocks make_report.document() produces (figures embedded as data URIs, so the page is one file)."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable

from .report_figures import svg_clean
from .report_format import DocBlock

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1240px;margin:0.8em auto;
padding:0 1em;color:#222;line-height:1.4}
h1{margin:0.2em 0 0.3em;font-size:1.6em}
table{border-collapse:collapse;margin:0.6em 0 1.4em;font-size:0.86em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
td.bad{color:#b00020;font-weight:bold}td.good{color:#1b6e20}
figure{margin:1em 0 2em}figure img{max-width:100%}figcaption{font-size:0.88em;color:#555}
figure h3{margin:0.2em 0}
#summary{font-size:0.78em;line-height:1.25;margin:0.3em 0 0.8em}
#summary td,#summary th{text-align:left;vertical-align:top;padding:2px 6px}#summary td:first-child{white-space:nowrap}
#fig-summary{margin:0.2em 0 0.2em}#fig-summary figcaption{font-size:0.8em}
details{margin:0.4em 0}summary{cursor:pointer}
code{background:#f5f5f5;padding:0 3px}
"""


def inline_html(text: str) -> str:
    """Escapes text and renders the Markdown the report uses inline: **bold**, *italic*, `code`."""
    t = html.escape(text, quote=False)
    t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)
    t = re.sub(r"\*(.+?)\*", r"<i>\1</i>", t)
    t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    return t


def html_table(
    header: list[str],
    rows: list[list[str]],
    classify: Callable[[str, str], str | None] | None = None,
    table_id: str | None = None,
) -> str:
    """An HTML table of string cells; classify(column, cell) names a cell's CSS class (None or "": none)."""
    attr = f' id="{table_id}"' if table_id else ""
    out = [f"<table{attr}><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = classify(header[i], c) if classify else ""
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{html.escape(c).replace(chr(10), '<br>')}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def body_html(blocks: list[DocBlock]) -> list[str]:
    """The blocks as HTML elements, a details block's folded blocks inside its <details>."""
    h = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            h.append(f"<{kind}>{inline_html(block[1])}</{kind}>")
        elif kind == "p":
            h.append(f"<p>{inline_html(block[1])}</p>")
        elif kind == "ul":
            h.append("<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            h.append(html_table(block[1], block[2], block[3], block[4] if len(block) > 4 else None))
        elif kind == "figure":
            name, title, caption, svg = block[1:5]
            heading = f"<h3>{html.escape(title)}</h3>" if len(block) < 6 or block[5] else ""
            data = base64.b64encode(svg_clean(svg).encode("utf-8")).decode("ascii")
            h.append(
                f'<figure id="{name}">{heading}'
                f'<img alt="{html.escape(title)}" src="data:image/svg+xml;base64,{data}">'
                f"<figcaption>{inline_html(caption)}</figcaption></figure>"
            )
        elif kind == "details":
            h.append(f"<details><summary>{inline_html(block[1])}</summary>")
            h += body_html(block[2])
            h.append("</details>")
    return h


def render(blocks: list[DocBlock]) -> str:
    """The report's blocks (make_report.document) as one self-contained HTML page, figures embedded."""
    h = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>ckptcheck overhead report</title>",
        f"<style>{CSS}</style></head><body>",
    ]
    h += body_html(blocks)
    h.append("</body></html>")
    return "\n".join(h) + "\n"
