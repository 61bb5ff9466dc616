"""The report's figures: matplotlib, SVG with fixed ids and no date, so the same inputs give the same bytes
(reports/make_report.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report_model import Report
import io
import math
import re
import sys

from .report_data import ENGINE_TAX_GOAL, FULL_RECOMPUTE_THEORY, PlannerPoint, median_of, policy_family
from .report_format import Figure

Save = Callable[[Any, str, str, str], None]  # save(fig, name, title, caption), in figures()


def figures(rep: Report) -> list[Figure]:
    """Every figure as (file name, title, caption, SVG text), drawn with matplotlib."""
    plt, color_for = pyplot()
    figs = []

    def save(fig: Any, name: str, title: str, caption: str) -> None:
        figs.append((name, title, caption, svg_of(plt, fig)))

    for draw in (_memory_figure, _frontier_figure, _overhead_figure):
        draw(rep, plt, color_for, save)
    return figs


def pyplot() -> tuple[Any, Callable[[int], Any]]:
    """matplotlib's pyplot set up for the report's figures (fixed SVG id salt, text as text, one font), and the
    report's palette as color_for(i). RuntimeError when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(
            "matplotlib is not installed for " + sys.executable + " (run ci/setup, or set CKPT_REPORT_PYTHON "
            "to a Python that has it)"
        ) from None
    matplotlib.rcParams.update(
        {
            "svg.hashsalt": "ckptcheck-report",
            "svg.fonttype": "none",
            "font.family": "DejaVu Sans",
            "font.size": 9,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "figure.dpi": 100,
            "path.simplify": False,
        }
    )
    palette = matplotlib.colormaps["tab10"].colors

    def color_for(i: int) -> Any:
        return palette[i % len(palette)]

    return plt, color_for


def svg_of(plt: Any, fig: Any) -> str:
    """The figure as SVG text, no date in its metadata; closes the figure."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "ckptcheck report"}, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _memory_figure(rep: Report, plt: Any, color_for: Callable[[int], Any], save: Save) -> None:
    """Peak memory vs L per policy, log-log, with sqrt(L) and log(L) guides; forward evaluations per layer."""
    if rep.planner:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        fams = list(rep.planner)
        for i, fam in enumerate(fams):
            pts = rep.planner[fam]
            xs = [p.layers for p in pts]
            ax.plot(xs, [p.peak for p in pts], marker="o", ms=3, lw=1.4, color=color_for(i), label=fam)
            ax2.plot(
                xs, [p.forward_evals / p.layers for p in pts], marker="o", ms=3, lw=1.4, color=color_for(i), label=fam
            )
        guide_l = sorted({p.layers for pts in rep.planner.values() for p in pts})
        if len(guide_l) >= 2:

            def anchor(fam_name: str) -> PlannerPoint | None:
                pts = rep.planner.get(fam_name)
                return pts[-1] if pts else None

            # Slope guides, drawn at half the height of the curve they describe so both stay visible.
            u = anchor("uniform") or anchor("revolve")
            if u:
                c = 0.5 * u.peak / math.sqrt(u.layers)
                ax.plot(guide_l, [c * math.sqrt(x) for x in guide_l], ls="--", color="0.45", lw=1, label="∝ √L (guide)")
            r = anchor("recursive")
            if r:
                c = 0.5 * r.peak / math.log2(r.layers)
                ax.plot(
                    guide_l, [c * math.log2(x) for x in guide_l], ls=":", color="0.2", lw=1.2, label="∝ log L (guide)"
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("layers L (homogeneous chain, planner only)")
        ax.set_ylabel("peak activation bytes")
        ax.set_title("Peak activation memory vs depth")
        ax.legend(fontsize=7, ncol=2)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlabel("layers L")
        ax2.set_ylabel("forward evaluations / L")
        ax2.set_title("Forward evaluations per layer (1 = no recompute)")
        save(
            fig,
            "fig-memory-vs-layers",
            "Peak memory vs L",
            "Planner only, homogeneous chains of the scaling block (bench_engine: mlp-deep's first block). Slope "
            "guides at half height: dashed ∝ √L (uniform's largest L), dotted ∝ log L (recursive's largest L). "
            "Optimal is planned up to the L its O(L² × levels) DP allows in the mode.",
        )


def _frontier_figure(rep: Report, plt: Any, color_for: Callable[[int], Any], save: Save) -> None:
    """Memory vs recompute FLOPs per case: the optimal frontier and every policy on it."""
    cases = [c for c in rep.cases if rep.frontier.get(c) or rep.steps.get(c)]
    if cases:
        ncol = min(2, len(cases))
        nrow = math.ceil(len(cases) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(5.6 * ncol, 4.0 * nrow), squeeze=False)
        for k, case in enumerate(cases):
            ax = axes[k // ncol][k % ncol]
            pts = rep.frontier.get(case, [])
            if pts:
                # Optimal's recompute is a step function of the budget: flat until the next budget admits a
                # cheaper schedule.
                xs, ys = [], []
                for p in pts:
                    xs.append(p.budget)
                    ys.append(p.flop_overhead)
                ax.step(xs, ys, where="post", color="0.25", lw=1.5, label="optimal frontier", zorder=2)
                ax.plot(
                    [p.peak for p in pts],
                    [p.flop_overhead for p in pts],
                    ls="none",
                    marker=".",
                    color="0.25",
                    ms=4,
                    zorder=2,
                )
            for i, r in enumerate(rep.steps.get(case, [])):
                ax.plot(
                    [r.peak],
                    [r.flop_overhead],
                    ls="none",
                    marker="os^vD<>ph*"[i % 10],
                    ms=7,
                    mfc="none",
                    mew=1.5,
                    color=color_for(i),
                    label=r.display,
                    zorder=3,
                )
            ax.set_xscale("log")
            ax.set_xlabel("peak activation bytes")
            ax.set_ylabel("FLOP overhead (recompute / (fwd + bwd))")
            ax.set_title(case)
            ax.legend(fontsize=6.5, loc="upper right")
        for k in range(len(cases), nrow * ncol):
            axes[k // ncol][k % ncol].set_visible(False)
        fig.tight_layout()
        save(
            fig,
            "fig-frontier",
            "Memory vs recompute per case",
            "The line is the optimal policy swept over budgets from the smallest feasible to store-all's peak (step "
            "function of the budget); markers are the policies at their own peaks.",
        )


def _overhead_figure(rep: Report, plt: Any, color_for: Callable[[int], Any], save: Save) -> None:
    """Measured vs theoretical overhead per policy, and the engine tax split per policy."""
    rows = list(rep.all_rows())
    if rows:
        split = any(r.recompute_share is not None for r in rows)
        if split:
            fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12.5, 5.2), gridspec_kw={"width_ratios": [1.25, 1]})
        else:
            fig, ax = plt.subplots(figsize=(7.5, 5.2))
        fams = list(rep.tax_by_policy())
        markers = "os^vD<>ph*"
        for i, fam in enumerate(fams):
            rs = [r for r in rows if policy_family(r) == fam]
            for j, r in enumerate(rs):
                ci = rep.cases.index(r.case)
                ax.errorbar(
                    [r.flop_overhead],
                    [r.time_ratio - 1.0],
                    yerr=[[max(0.0, r.time_ratio - r.q1)], [max(0.0, r.q3 - r.time_ratio)]],
                    ls="none",
                    marker=markers[ci % len(markers)],
                    ms=6,
                    mfc="none",
                    mew=1.3,
                    capsize=2,
                    color=color_for(i),
                    label=fam if j == 0 else None,
                )
        lim = max([0.45] + [r.flop_overhead for r in rows] + [r.time_ratio - 1.0 for r in rows]) * 1.08
        low = min([0.0] + [r.time_ratio - 1.0 for r in rows]) - 0.03
        ax.plot([0, lim], [0, lim], color="0.3", lw=1, label="engine tax 0 (time = FLOP theory)")
        ax.plot(
            [0, lim],
            [ENGINE_TAX_GOAL, lim + ENGINE_TAX_GOAL],
            color="0.3",
            lw=1,
            ls=":",
            label=f"engine tax {ENGINE_TAX_GOAL} (goal)",
        )
        ax.axvline(FULL_RECOMPUTE_THEORY, color="tab:red", lw=1, ls="--")
        ax.axhline(FULL_RECOMPUTE_THEORY, color="tab:red", lw=1, ls="--", label="full recomputation, theory 33%")
        ax.set_xlim(-0.02, lim)
        ax.set_ylim(low, lim)
        ax.set_xlabel("theoretical overhead: FLOP overhead")
        ax.set_ylabel("measured overhead: time ratio − 1")
        ax.set_title(
            "Measured vs theoretical (markers: "
            + ", ".join(f"{markers[i % len(markers)]} {c}" for i, c in enumerate(rep.cases))
            + ")",
            fontsize=8,
        )
        ax.legend(fontsize=6.5, loc="upper left")
        if split:
            ys = list(range(len(fams)))
            ex = [median_of([r.rest_tax for r in rows if policy_family(r) == f]) or 0.0 for f in fams]
            oc = [median_of([r.op_cost_tax for r in rows if policy_family(r) == f]) or 0.0 for f in fams]
            ax2.barh(
                [y - 0.2 for y in ys],
                oc,
                height=0.38,
                color="tab:orange",
                label="recomputed ops beyond their FLOP share",
            )
            ax2.barh(
                [y + 0.2 for y in ys], ex, height=0.38, color="tab:blue", label="rest: executor, allocation, cache"
            )
            ax2.axvline(ENGINE_TAX_GOAL, color="0.3", ls=":", lw=1, label=f"goal {ENGINE_TAX_GOAL}")
            ax2.axvline(0, color="0.3", lw=0.8)
            ax2.set_yticks(ys)
            ax2.set_yticklabels(fams, fontsize=7)
            ax2.invert_yaxis()
            ax2.set_xlabel("median over cases")
            ax2.set_title("Engine tax split per policy")
            ax2.legend(fontsize=6.5, loc="lower right")
        fig.tight_layout()
        save(
            fig,
            "fig-overhead",
            "Measured vs theoretical overhead",
            "Left: each marker is a (case, policy); error bars span the interquartile range over repetitions of "
            "interleaved steps; the height above the solid diagonal is the engine tax. Right: the engine tax split "
            "into what the recomputed ops cost beyond their FLOP share and everything else (see Engine tax per "
            "policy).",
        )


def svg_clean(svg: str) -> str:
    """The SVG without its XML prolog (same bytes every run: no date, fixed id salt)."""
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    return svg
