"""The report's number formats, one place, so the tables, the summary and the terminal agree
(reports/make_report.py).
"""

from __future__ import annotations

from typing import Any

from .report_data import MIB

# One block of the report's document (make_report.document): ("h1"|"h2"|"h3"|"p", text), ("ul", [items]),
# ("table", header, rows, classify or None[, id]), ("figure", name, title, caption, svg[, heading]),
# ("details", summary, [blocks]); both renderers (Markdown, HTML) read them.
DocBlock = tuple[Any, ...]
Figure = tuple[str, str, str, str]  # (file name without .svg, title, caption, SVG text)


def fmt_bytes(b: float) -> str:
    """Three significant digits in the largest binary unit below the value: 15.9 KiB, 6.09 MiB, 9.16 GiB."""
    for unit, size in (("GiB", MIB * 1024), ("MiB", MIB), ("KiB", 1024.0)):
        if b >= size:
            v = b / size
            return f"{v:.3g} {unit}" if v >= 100 else (f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}")
    return f"{int(b)} B"


def fmt_ratio(x: float) -> str:
    """Three decimals: 0.512."""
    return f"{x:.3f}"


def fmt_overhead(x: float) -> str:
    """Four decimals: 0.3333."""
    return f"{x:.4f}"


def fmt_tax(x: float) -> str:
    """Signed, three decimals: +0.012."""
    return f"{x:+.3f}"


def fmt_pct(x: float) -> str:
    """A share as a percentage, one decimal: 42.5%."""
    return f"{100.0 * x:.1f}%"


def fmt_time(s: float) -> str:
    """Seconds in s, ms or us."""
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def opt_tax(x: float | None) -> str:
    """fmt_tax, or a dash for None (not measured)."""
    return "—" if x is None else fmt_tax(x)


def evals_text(r: Any) -> str:
    """A step's forward evaluations; with micro-batches, also as M x one micro-batch's."""
    m = getattr(r, "micro_batches", 1)
    return f"{r.forward_evals} ({m} × {r.forward_evals // m})" if m > 1 else str(r.forward_evals)
