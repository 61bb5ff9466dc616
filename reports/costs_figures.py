"""The figure of a profiled model's plans (`ckptcheck report --costs`, costs_report.py): FLOP and predicted time
overhead against planned peak for every policy, the optimal frontier, the budget and the cheapest policy under it."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .report_figures import pyplot, svg_of
from .report_format import fmt_bytes

if TYPE_CHECKING:
    from .costs_report import Plans


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "model"


def _byte_ticks(lo: float, hi: float, gap: float = 0.12) -> list[float]:
    """Tick positions for a log byte axis from lo to hi: powers of two first, then 1.5 times them, then 1.25 and
    1.75 times, each kept only when at least `gap` of the axis's width from every tick kept before."""
    span = math.log(hi / lo)
    kept = []
    for subs in ((1.0,), (1.5,), (1.25, 1.75)):
        n = math.floor(math.log2(max(1.0, lo)))
        while 2.0**n <= hi:
            for m in subs:
                t = m * 2.0**n
                if lo <= t <= hi and all(abs(math.log(t / k)) >= gap * span for k in kept):
                    kept.append(t)
            n += 1
    return sorted(kept)


def _tick_label(v: float) -> str:
    """A byte tick's label, short: 16 MiB, 1.5 GiB, 512 KiB."""
    for unit, size in (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0)):
        if v >= size:
            return f"{round(v / size, 2):g} {unit}"
    return f"{v:g} B"


def draw_figures(plans_list: list[Plans]) -> None:
    """Draws each profiled model's frontier figure into its .figure (file names unique over the list)."""
    if not plans_list:
        return
    plt, color_for = pyplot()
    used = set()
    for pl in plans_list:
        base = "fig-costs-" + _slug(pl.short_model)
        name, k = base, 2
        while name in used:
            name, k = f"{base}-{k}", k + 1
        used.add(name)
        pl.figure = (
            name,
            f"Predicted memory vs recompute: {pl.short_model}",
            "Predicted from the profiled chain costs, not measured. The line is the optimal policy swept "
            "over budgets from the smallest feasible to store-all's peak (a step function of the budget; "
            "dots at the peaks it reaches); markers are the policies at their planned peaks, filled when "
            "PyTorch can apply them as a per-module placement, hollow when not. Left: FLOP overhead; "
            "right: predicted time overhead (the recomputed blocks' measured forward time ÷ the plain "
            "step). The shaded band is below the smallest feasible budget; the dashed red line is the "
            "budget and the red star the cheapest policy under it, when a budget is given.",
            _draw(pl, plt, color_for),
        )


def _panel(
    ax: Any, pl: Plans, what: tuple[str, str, str], color_for: Callable[[int], Any], axis: tuple[bool, float, float]
) -> list[Any]:
    """One panel of a model's figure, what = (attribute: flop_overhead or time_overhead, y label, title); returns
    its legend handles. axis: (log scale, left, right)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    attr, ylabel, title = what
    log, left, right = axis
    markers = "os^vD<>ph*"
    handles = []
    if pl.min_feasible > left:
        ax.axvspan(left, pl.min_feasible, color="0.88", lw=0, zorder=0)
        below = f"below the smallest feasible budget ({fmt_bytes(pl.min_feasible)})"
        handles.append(Patch(color="0.88", label=below))
    front = [p for p in pl.frontier if getattr(p, attr) is not None]
    if front:
        ax.step(
            [p.budget for p in front], [getattr(p, attr) for p in front], where="post", color="0.25", lw=1.5, zorder=2
        )
        ax.plot(
            [p.peak for p in front],
            [getattr(p, attr) for p in front],
            ls="none",
            marker=".",
            color="0.25",
            ms=4,
            zorder=2,
        )
        handles.append(Line2D([], [], color="0.25", lw=1.5, marker=".", ms=4, label="optimal frontier"))
    for i, p in enumerate(pl.policies):
        y = getattr(p, attr)
        label = p.policy + ("" if p.expressible else " (not per-module)")
        if y is None:
            handles.append(
                Line2D(
                    [],
                    [],
                    ls="none",
                    marker=markers[i % len(markers)],
                    ms=7,
                    mew=1.5,
                    color=color_for(i),
                    mfc=color_for(i) if p.expressible else "none",
                    label=label,
                )
            )
            continue
        # A policy at the same point as earlier ones is drawn smaller, on top, so each stays visible.
        same = sum(1 for q in pl.policies[:i] if (q.peak, getattr(q, attr)) == (p.peak, y))
        (h,) = ax.plot(
            [p.peak],
            [y],
            ls="none",
            marker=markers[i % len(markers)],
            ms=max(3.0, 7.0 - 2.0 * same),
            mew=1.5,
            color=color_for(i),
            mfc=color_for(i) if p.expressible else "none",
            zorder=3,
            label=label,
        )
        handles.append(h)
    if pl.budget is not None:
        ax.axvline(pl.budget, color="tab:red", ls="--", lw=1.2, zorder=1)
        handles.append(Line2D([], [], color="tab:red", ls="--", lw=1.2, label=f"budget {fmt_bytes(pl.budget)}"))
        c = pl.cheapest
        if c is not None and getattr(c, attr) is not None:
            (h,) = ax.plot(
                [c.peak],
                [getattr(c, attr)],
                ls="none",
                marker="*",
                ms=17,
                mfc="none",
                mec="tab:red",
                mew=1.4,
                zorder=4,
                label=f"cheapest under the budget: {c.policy}",
            )
            handles.append(h)
    if not any(getattr(p, attr) is not None for p in pl.policies + pl.frontier):
        ax.text(
            0.5,
            0.5,
            "no time overhead predicted",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="0.4",
            bbox={"fc": "white", "ec": "none"},
        )
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(_byte_ticks(left, right)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _tick_label(v)))
    ax.set_xlim(left, right)
    top = max(0.05, ax.get_ylim()[1])
    ax.set_ylim(-0.03 * top, top)  # markers at 0 (store-all) clear of the axis
    ax.set_xlabel("peak activation bytes (planned)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return handles


def _draw(pl: Plans, plt: Any, color_for: Callable[[int], Any]) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    xs = [pl.store_all_peak, pl.min_feasible] + [p.peak for p in pl.policies] + [p.peak for p in pl.frontier]
    xs += [p.budget for p in pl.frontier] + ([pl.budget] if pl.budget is not None else [])
    xs = [x for x in xs if x > 0]
    lo, hi = (min(xs), max(xs)) if xs else (1, 2)
    log = bool(xs) and hi / lo > 1.0
    left, right = (lo / 1.06, hi * 1.06) if log else (0, hi * 1.06 + 1)
    legend = []  # the FLOP panel's handles: every policy has a FLOP overhead, not every one a predicted time
    for ax, attr, ylabel, title in (
        (axes[0], "flop_overhead", "FLOP overhead (recompute / (fwd + bwd))", "FLOP overhead (predicted)"),
        (axes[1], "time_overhead", "time overhead (recomputed fwd time / plain step)", "Time overhead (predicted)"),
    ):
        handles = _panel(ax, pl, (attr, ylabel, title), color_for, (log, left, right))
        if not legend:
            legend = handles
    fig.suptitle(f"{pl.model} ({pl.framework}, batch {pl.batch_size}, {pl.layers} blocks): predicted", fontsize=9)
    fig.legend(
        handles=legend,
        fontsize=6.5,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        frameon=False,
        title="filled: per-module placement",
        title_fontsize=6.5,
    )
    fig.tight_layout()
    return svg_of(plt, fig)
