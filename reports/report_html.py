"""The overhead report as HTML: the page's style, the inline Markdown it renders, tables and the page itself from
the blocks make_report.document() produces (figures embedded as data URIs, so the page is one file)."""
import base64
import html
import re

from report_figures import svg_clean


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1240px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:0.6em 0 1.4em;font-size:0.86em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
td.bad{color:#b00020;font-weight:bold}td.good{color:#1b6e20}
figure{margin:1em 0 2em}figure img{max-width:100%}figcaption{font-size:0.88em;color:#555}
code{background:#f5f5f5;padding:0 3px}
"""


def inline_html(text):
    """Escapes text and renders the Markdown the report uses inline: **bold**, *italic*, `code`."""
    t = html.escape(text, quote=False)
    t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)
    t = re.sub(r"\*(.+?)\*", r"<i>\1</i>", t)
    t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    return t


def html_table(header, rows, classify=None):
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = classify(header[i], c) if classify else ""
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{html.escape(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def render(blocks):
    """The report's blocks (make_report.document) as one self-contained HTML page, figures embedded."""
    h = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
         "<title>ckptcheck overhead report</title>", f"<style>{CSS}</style></head><body>"]
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            h.append(f"<{kind}>{inline_html(block[1])}</{kind}>")
        elif kind == "p":
            h.append(f"<p>{inline_html(block[1])}</p>")
        elif kind == "ul":
            h.append("<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            h.append(html_table(block[1], block[2], block[3]))
        elif kind == "figure":
            _, name, title, caption, svg = block
            data = base64.b64encode(svg_clean(svg).encode("utf-8")).decode("ascii")
            h.append(f"<figure id=\"{name}\"><h3>{html.escape(title)}</h3>"
                     f"<img alt=\"{html.escape(title)}\" src=\"data:image/svg+xml;base64,{data}\">"
                     f"<figcaption>{inline_html(caption)}</figcaption></figure>")
    h.append("</body></html>")
    return "\n".join(h) + "\n"
