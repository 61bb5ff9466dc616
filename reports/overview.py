"""The report's first screen (reports/make_report.py): one figure and one table that answer "what does
checkpointing save and cost here, and which policy should I use?" per catalogue case (measured by bench_engine)
and per profiled model (predicted from its chain costs, costs_report.py).

Every policy of a subject becomes an Option: the share of activation memory it saves against storing everything,
and the step time it pays over the plain step. The recommended policy at a budget is the one that pays the least
time among those whose peak fits; the frontier is the set no other option beats on both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .report_model import Report
from .report_figures import pyplot, svg_of
from .report_format import DocBlock, Figure, fmt_bytes, fmt_time

BUDGETS = ((0.5, "½"), (0.25, "¼"))  # common budgets, as shares of the activation memory without checkpointing
FIGURE = "fig-summary"
HEADER = [
    "case",
    "without checkpointing: activations, step",
    "recommended within ½ of the memory",
    "recommended within ¼ of the memory",
    "in plain words",
]


@dataclass(frozen=True)
class Option:
    """One policy of a subject: its peak and the step time it pays over the plain step, as a share of it."""

    policy: str
    peak: int
    base_peak: int  # the subject's peak without checkpointing
    time_paid: float

    @property
    def saved(self) -> float:
        """The share of activation memory saved against the peak without checkpointing (0 when that is 0)."""
        return 1.0 - self.peak / self.base_peak if self.base_peak else 0.0


@dataclass
class Subject:
    """A case or profiled model: its policies as Options, and what a step costs without checkpointing."""

    name: str
    detail: str  # blocks, and whether predicted, for the table
    base_peak: int
    step_seconds: float
    options: list[Option]
    predicted: bool  # from chain costs (a profiled model), not measured

    def pick(self, share: float) -> Option | None:
        """The option that pays the least time among those within `share` of the memory, or None."""
        fits = [o for o in self.options if o.peak <= share * self.base_peak]
        return min(fits, key=lambda o: (o.time_paid, o.peak), default=None)

    def least_memory(self) -> Option | None:
        """The option with the smallest peak (the less time paid among equal peaks), or None."""
        return min(self.options, key=lambda o: (o.peak, o.time_paid), default=None)

    def frontier(self) -> list[Option]:
        """Options no other saves more memory for no more time, by time paid."""
        out = []
        for o in sorted(self.options, key=lambda o: (o.time_paid, -o.saved)):
            if not out or o.saved > out[-1].saved:
                out.append(o)
        return out


def subjects(rep: Report) -> list[Subject]:
    """Each benchmarked case (its policies that ran bitwise equal and as planned), then each profiled model (its
    policies with a predicted time that a per-module placement can apply, all of them with a time when none can)."""
    out = []
    for case in rep.cases:
        rows = rep.steps.get(case, [])
        if not rows:
            continue
        ok = [r for r in rows if r.planned_ok and not (r.verdict or "").startswith("DIFFERS")]
        base = rows[0].store_all_peak
        out.append(
            Subject(
                case,
                f"{rows[0].layers} blocks",
                base,
                rows[0].store_all_seconds,
                [Option(r.display, r.peak, base, r.time_ratio - 1.0) for r in ok],
                predicted=False,
            )
        )
    for pl in rep.costs:
        # A policy without a predicted time has nothing to weigh here; the model's own section lists it.
        timed = [p for p in pl.policies if p.time_overhead is not None]
        usable = [p for p in timed if p.expressible] or timed
        opts = [Option(p.policy, p.peak, pl.store_all_peak, p.time_overhead) for p in usable]
        out.append(
            Subject(
                pl.short_model,
                f"{pl.layers} blocks, predicted",
                pl.store_all_peak,
                pl.step_seconds,
                opts,
                predicted=True,
            )
        )
    return out


def pct_saved(x: float) -> str:
    """A memory share saved: one decimal under 1%, whole percent above."""
    return f"{100.0 * x:.1f}%" if 0 < x < 0.01 else f"{100.0 * x:.0f}%"


def pct_time(x: float) -> str:
    """A signed time share: one decimal under 10%, whole percent above."""
    return f"{100.0 * x:+.1f}%" if abs(x) < 0.1 else f"{100.0 * x:+.0f}%"


def option_cell(o: Option | None) -> str:
    """The table cell of a recommended option ("none fits" for None)."""
    if o is None:
        return "none fits"
    return f"{o.policy}\n{pct_saved(o.saved)} saved, {pct_time(o.time_paid)} time"


def sentence(s: Subject) -> str:
    """One sentence of plain words: the policy at half the memory and the one that saves the most."""
    time = "predicted step time" if s.predicted else "step time"
    half, least = s.pick(0.5), s.least_memory()
    if least is None:
        return "No policy to compare."
    most = f"{least.policy} saves {pct_saved(least.saved)} of activation memory for {pct_time(least.time_paid)} {time}"
    if half is None:
        return f"No policy stays within half the memory; {most}."
    text = f"{half.policy} saves {pct_saved(half.saved)} of activation memory for {pct_time(half.time_paid)} {time}"
    if least is not half and least.peak < half.peak:
        text += f"; {least.policy} saves the most, {pct_saved(least.saved)}, for {pct_time(least.time_paid)}"
    return text + "."


def table_rows(subs: list[Subject]) -> list[list[str]]:
    """The first screen's table (HEADER's columns), one row per subject."""
    rows = []
    for s in subs:
        base = fmt_bytes(s.base_peak) + (f"\n{fmt_time(s.step_seconds)}" if s.step_seconds > 0 else "")
        rows.append(
            [f"{s.name}\n{s.detail}", base] + [option_cell(s.pick(share)) for share, _ in BUDGETS] + [sentence(s)]
        )
    return rows


LEAD = (
    "What each checkpointing policy saves (activation memory, against storing everything) and what it costs (step "
    "time, over the plain step)."
)


def blocks(rep: Report, fig: Figure | None) -> list[DocBlock]:
    """The first screen as make_report.document's blocks: the lead, the figure, the table."""
    subs = subjects(rep)
    if not subs:
        return []
    d = [("p", LEAD)]
    if fig is not None:
        d.append(("figure",) + fig + (False,))  # no heading: the first screen is for the figure and the table
    d.append(("table", HEADER, table_rows(subs), None, "summary"))
    return d


def figure(rep: Report) -> Figure | None:
    """(name, title, caption, svg): memory saved against time paid, a panel for the measured cases and one for
    the profiled models; None when there is nothing to draw."""
    subs = subjects(rep)
    measured = [s for s in subs if not s.predicted and s.options]
    predicted = [s for s in subs if s.predicted and s.options]
    panels = [(measured, "Measured (bench_engine)"), (predicted, "Profiled models (predicted)")]
    panels = [p for p in panels if p[0]]
    if not panels:
        return None
    plt, color_for = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.0 * len(panels), 2.45), squeeze=False)
    handles = []
    k = 0
    for ax, (group, title) in zip(axes[0], panels, strict=False):
        for s in group:
            color = color_for(k)
            k += 1
            ax.plot(
                [100 * o.time_paid for o in s.options],
                [100 * o.saved for o in s.options],
                ls="none",
                marker="o",
                ms=3.5,
                mfc="none",
                mew=0.9,
                color=color,
                alpha=0.7,
            )
            front = s.frontier()
            handles += ax.plot(
                [100 * o.time_paid for o in front],
                [100 * o.saved for o in front],
                marker="o",
                ms=4,
                lw=1.3,
                color=color,
                label=s.name + (" (predicted)" if s.predicted else ""),
            )
            half = s.pick(0.5)
            if half is not None:
                ax.plot(
                    [100 * half.time_paid],
                    [100 * half.saved],
                    ls="none",
                    marker="*",
                    ms=11,
                    color=color,
                    mec="black",
                    mew=0.6,
                )
        for share, label in BUDGETS:
            ax.axhline(100 * (1 - share), color="0.5", lw=0.8, ls=":")
            ax.text(
                1.0,
                100 * (1 - share),
                f" within {label} ",
                transform=ax.get_yaxis_transform(),
                ha="right",
                va="bottom",
                fontsize=7,
                color="0.35",
            )
        ax.set_ylim(-5, 105)
        ax.set_xlabel("step time paid (% over the plain step)" + (", predicted" if group[0].predicted else ""))
        ax.set_ylabel("activation memory saved (%)")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    caption = (
        "Each marker is a policy (up: more memory saved, right: more step time paid); lines join each case's "
        "frontier, stars mark the recommended policy within half the memory. Recommended within a budget: the "
        "policy that fits and pays the least time, among steps bitwise equal and as planned."
    )
    return (FIGURE, "Memory saved vs time paid", caption, svg_of(plt, fig))
