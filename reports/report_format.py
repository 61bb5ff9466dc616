"""The report's number formats, one place, so the tables, the summary and the terminal agree
(reports/make_report.py).
"""
from .report_data import MIB


def fmt_bytes(b):
    """Three significant digits in the largest binary unit below the value: 15.9 KiB, 6.09 MiB, 9.16 GiB."""
    for unit, size in (("GiB", MIB * 1024), ("MiB", MIB), ("KiB", 1024.0)):
        if b >= size:
            v = b / size
            return f"{v:.3g} {unit}" if v >= 100 else (f"{v:.1f} {unit}" if v >= 10 else f"{v:.2f} {unit}")
    return f"{int(b)} B"


def fmt_ratio(x):
    return f"{x:.3f}"


def fmt_overhead(x):
    return f"{x:.4f}"


def fmt_tax(x):
    return f"{x:+.3f}"


def fmt_pct(x):
    return f"{100.0 * x:.1f}%"


def fmt_time(s):
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def opt_tax(x):
    return "—" if x is None else fmt_tax(x)


def evals_text(r):
    """A step's forward evaluations; with micro-batches, also as M x one micro-batch's."""
    m = getattr(r, "micro_batches", 1)
    return f"{r.forward_evals} ({m} × {r.forward_evals // m})" if m > 1 else str(r.forward_evals)
