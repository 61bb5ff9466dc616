"""The report's "Profiled model" sections (reports/make_report.py --costs-plans FILE): the plans `ckptcheck report
--costs costs.json [--budget B]` makes from a user's model's chain costs (harness/engine/COSTS.md), read from its
file (format "ckptcheck-costs-plans", version 1) and rendered like a catalogue case: a table of policies, the
memory/recompute frontier figure with every policy placed on it, the cheapest policy under the budget and the
smallest feasible budget. Every number is a prediction (the planner's peak and FLOPs, the time overhead from the
blocks' measured forward times): nothing here ran checkpointed, and the text says so.
"""
import json
import math
import re

from . import plan_checks
from .report_data import BadInput, load_json
from .report_figures import pyplot, svg_of
from .report_format import fmt_bytes, fmt_overhead, fmt_pct, fmt_ratio, fmt_time

FORMAT = "ckptcheck-costs-plans"
VERSION = 1
WHY_NOT_CHARS = 80  # the placement column's reason, shortened past this


# ---------------------------------------------------------------------------------------------------------------
# Reading and checking the file: one line naming the field, as every reader of ckptcheck's files does.


class _Fields:
    """Typed getters over one JSON object; a bad field raises BadInput naming the file and the field's path."""

    def __init__(self, path, obj, where=""):
        self.path, self.obj, self.where = path, obj, where

    def fail(self, key, what):
        raise BadInput(f"costs plans '{self.path}': {self.where}{key}: {what}")

    def get(self, key, nullable=False):
        if key not in self.obj:
            self.fail(key, "missing")
        v = self.obj[key]
        return v, (v is None and nullable)

    def integer(self, key, least=0, nullable=False):
        v, null = self.get(key, nullable)
        if null:
            return None
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            kind = "a non-negative integer" if least == 0 else f"an integer >= {least}"
            self.fail(key, f"must be {kind}" + (" or null" if nullable else ""))
        return v

    def number(self, key, nullable=False):
        v, null = self.get(key, nullable)
        if null:
            return None
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            self.fail(key, "must be a non-negative number" + (" or null" if nullable else ""))
        return float(v)

    def string(self, key):
        v, _ = self.get(key)
        if not isinstance(v, str):
            self.fail(key, "must be a string")
        return v

    def boolean(self, key):
        v, _ = self.get(key)
        if not isinstance(v, bool):
            self.fail(key, "must be true or false")
        return v

    def array(self, key):
        v, _ = self.get(key)
        if not isinstance(v, list):
            self.fail(key, "must be an array")
        return v

    def object(self, key, nullable=False):
        v, null = self.get(key, nullable)
        if null:
            return None
        if not isinstance(v, dict):
            self.fail(key, "must be an object" + (" or null" if nullable else ""))
        return _Fields(self.path, v, f"{self.where}{key}.")

    def element(self, key, i, v):
        if not isinstance(v, dict):
            raise BadInput(f"costs plans '{self.path}': {self.where}{key}[{i}]: must be an object")
        return _Fields(self.path, v, f"{self.where}{key}[{i}].")


class Policy:
    def __init__(self, f):
        self.policy = f.string("policy")
        self.family = f.string("family")
        self.peak = f.integer("peak_activation_bytes")
        self.forward_evals = f.integer("forward_evals")
        self.flop_overhead = f.number("flop_overhead")
        self.time_overhead = f.number("time_overhead", nullable=True)  # null: not predicted
        self.expressible = f.boolean("expressible")
        self.why_not = f.string("why_not")
        if self.expressible:
            v, _ = f.get("saved_bytes")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                f.fail("saved_bytes", "must be a non-negative integer (the policy is expressible)")
            self.saved_bytes = v
        else:
            if f.get("saved_bytes")[0] is not None:
                f.fail("saved_bytes", "must be null (the policy is not expressible)")
            self.saved_bytes = None


class FrontierPoint:
    def __init__(self, f):
        self.budget = f.integer("budget")
        self.peak = f.integer("peak_activation_bytes")
        self.forward_evals = f.integer("forward_evals")
        self.flop_overhead = f.number("flop_overhead")
        self.time_overhead = f.number("time_overhead", nullable=True)  # null: not predicted


class Cheapest:
    def __init__(self, f):
        self.policy = f.string("policy")
        self.peak = f.integer("peak_activation_bytes")
        self.flop_overhead = f.number("flop_overhead")
        self.time_overhead = f.number("time_overhead", nullable=True)  # null: not predicted


class Plans:
    """One `ckptcheck report --costs` plans file."""

    def __init__(self, doc, path):
        if not isinstance(doc, dict):
            raise BadInput(f"costs plans '{path}': not a JSON object")
        f = _Fields(path, doc)
        fmt = f.string("format")
        if fmt != FORMAT:
            hint = (" (this is a chain-costs file: make the plans with `ckptcheck report --costs FILE`)"
                    if fmt == "ckptcheck-chain-costs" else "")
            f.fail("format", f"must be \"{FORMAT}\", not \"{fmt}\"{hint}")
        v, _ = f.get("version")
        if v != VERSION or isinstance(v, bool):
            f.fail("version", f"must be {VERSION}, not {json.dumps(v)} (this report reads version {VERSION})")
        self.path = path
        self.model = f.string("model")
        self.framework = f.string("framework")
        self.batch_size = f.integer("batch_size", least=1)
        self.layers = f.integer("layers", least=1)
        self.step_seconds = f.number("step_seconds")
        self.store_all_peak = f.integer("store_all_peak_bytes")
        self.min_feasible = f.integer("min_feasible_budget")
        self.budget = f.integer("budget", nullable=True)
        c = f.object("cheapest", nullable=True)
        self.cheapest = Cheapest(c) if c is not None else None
        self.policies = [Policy(f.element("policies", i, p)) for i, p in enumerate(f.array("policies"))]
        self.frontier = [FrontierPoint(f.element("frontier", i, p)) for i, p in enumerate(f.array("frontier"))]
        self.frontier.sort(key=lambda p: p.budget)  # stable: the file's order among equal budgets
        self.figure = None  # (name, title, caption, svg), set by draw_figures
        self.checks = []  # plan_checks rows: the placements applied in PyTorch and checked

    @property
    def short_model(self):
        """The model spec without the adapter and the directories: `gpt2.py:plan`."""
        return self.model.split("module=", 1)[-1].split("/")[-1]

    def optimal_at(self, peak):
        """The frontier point at the largest budget <= peak, and whether that budget is exactly peak."""
        best = None
        for p in self.frontier:
            if p.budget <= peak:
                best = p
        return best, best is not None and best.budget == peak


def load(path):
    return Plans(load_json(path, "costs plans"), path)


# ---------------------------------------------------------------------------------------------------------------
# Text


HEADER = ["policy", "peak activation (planned)", "bytes", "× store-all", "forward evals", "FLOP overhead",
          "predicted time overhead", "frontier", "per-module placement", "predicted saved bytes"]

NOTE = ("Predicted, not measured: this table comes from the chain costs alone. *peak activation (planned)* is the "
        "planner's peak for the schedule on the profiled chain costs (harness/engine/COSTS.md); *FLOP overhead* "
        "= recomputed FLOPs / (forward + backward FLOPs of the plain step); *predicted time overhead* = the "
        "measured forward time of the blocks the policy recomputes (as often as it recomputes them) ÷ the plain "
        "step's time; *frontier*: on = no more recompute than the optimal policy at the same budget (the "
        "frontier's point at the largest swept budget at or below the policy's peak); *per-module placement*: "
        "whether PyTorch's per-module `torch.utils.checkpoint` can apply it (`ckptcheck plan --costs ... "
        "--placement`), else why not; *predicted saved bytes*: what that placement's forward would leave saved "
        "for backward, each storage once, which `ckptcheck validate --plan` measures.")


def _time(x):
    return "—" if x is None else fmt_overhead(x)


def _short(text):
    text = " ".join(text.split())
    return text if len(text) <= WHY_NOT_CHARS else text[:WHY_NOT_CHARS - 1].rstrip() + "…"


def frontier_flag(plans, p):
    """True (on, or below the sampled block-level frontier), False (off), None (no frontier point at or below)."""
    opt, _ = plans.optimal_at(p.peak)
    if opt is None:
        return None
    # Optimal's recompute never grows with the budget, so a policy above the sampled point is above optimal at
    # its own peak too; at or below it, it is on the frontier (below: op-level recompute, outside the DP's family).
    return p.flop_overhead <= opt.flop_overhead + 1e-9 * max(1.0, opt.flop_overhead)


def is_cheapest(plans, p):
    return plans.budget is not None and plans.cheapest is not None and plans.cheapest.policy == p.policy


def policy_cells(plans, p):
    ratio = fmt_ratio(p.peak / plans.store_all_peak) if plans.store_all_peak else "—"
    placement = "yes" if p.expressible else ("no: " + _short(p.why_not) if p.why_not.strip() else "no")
    saved = f"{fmt_bytes(p.saved_bytes)} ({p.saved_bytes})" if p.saved_bytes is not None else "—"
    name = p.policy + (" (cheapest under the budget)" if is_cheapest(plans, p) else "")
    return [name, fmt_bytes(p.peak), str(p.peak), ratio, str(p.forward_evals), fmt_overhead(p.flop_overhead),
            _time(p.time_overhead), {True: "on", False: "off", None: "—"}[frontier_flag(plans, p)],
            placement, saved]


def _share(plans, b):
    return f", {fmt_pct(b / plans.store_all_peak)} of store-all" if plans.store_all_peak else ""


def budget_line(plans):
    """The cheapest policy under the budget (when one is given) and the smallest feasible budget, one line."""
    s = (f"Smallest feasible budget: {fmt_bytes(plans.min_feasible)} ({plans.min_feasible} bytes"
         f"{_share(plans, plans.min_feasible)}). ")
    if plans.budget is None:
        return s + "No budget given (`ckptcheck report --costs FILE --budget B` names the cheapest policy under B)."
    under = f"the budget of {fmt_bytes(plans.budget)} ({plans.budget} bytes)"
    c = plans.cheapest
    if c is None:
        return s + f"No policy fits under {under}."
    return (s + f"Cheapest policy under {under}: **{c.policy}**, planned peak {fmt_bytes(c.peak)} ({c.peak} bytes), "
            f"FLOP overhead {fmt_overhead(c.flop_overhead)}, predicted time overhead {_time(c.time_overhead)}.")


def summary_lines(plans_list):
    """One line per profiled model for the report's summary."""
    out = []
    for pl in plans_list:
        n = sum(1 for p in pl.policies if p.expressible)
        s = (f"Profiled model **{pl.model}** ({pl.framework}, batch {pl.batch_size}, {pl.layers} blocks; predicted "
             f"from its chain costs, not measured): store-all peak {fmt_bytes(pl.store_all_peak)}, smallest feasible "
             f"budget {fmt_bytes(pl.min_feasible)}")
        s += f" ({fmt_pct(pl.min_feasible / pl.store_all_peak)} of it)" if pl.store_all_peak else ""
        if pl.budget is not None and pl.cheapest is not None:
            c = pl.cheapest
            s += (f"; cheapest under {fmt_bytes(pl.budget)}: {c.policy} "
                  f"(FLOP overhead {fmt_overhead(c.flop_overhead)}, "
                  f"predicted time overhead {_time(c.time_overhead)})")
        elif pl.budget is not None:
            s += f"; no policy fits under {fmt_bytes(pl.budget)}"
        s += f"; {n} of {len(pl.policies)} policies can be applied as a per-module placement."
        out.append(s)
    return out


def section_blocks(plans):
    """The section of one profiled model, as make_report.document's blocks."""
    pl = plans
    intro = (f"{pl.framework}, batch {pl.batch_size}, {pl.layers} blocks, plain step {fmt_time(pl.step_seconds)} "
             f"(measured by `ckptcheck profile`); store-all peak {fmt_bytes(pl.store_all_peak)} "
             f"({pl.store_all_peak} bytes). Every other number here is **predicted** from the chain costs.")
    d = [("h2", f"Profiled model: {pl.model}"), ("p", intro), ("p", budget_line(pl)),
         ("table", HEADER, [policy_cells(pl, p) for p in pl.policies], None), ("p", NOTE)]
    if pl.checks:
        d += plan_checks.blocks(pl.checks)
    if pl.figure is not None:
        d.append(("figure",) + pl.figure)
    return d


def attach_checks(plans_list, loops):
    """Each plan loop's rows to the section of its model; a loop of a model without a section is bad input."""
    for adapter, rows in loops:
        matches = [pl for pl in plans_list if pl.model == adapter]
        if not matches:
            raise BadInput(f"plan loop of '{adapter}': no --costs-plans of that model")
        matches[0].checks = rows


def terminal_lines(plans_list):
    out = []
    for pl in plans_list:
        out.append(f"Profiled model {pl.model} (predicted): " + re.sub(r"[*`]", "", budget_line(pl)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# The figure


def _slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "model"


def _byte_ticks(lo, hi, gap=0.12):
    """Tick positions for a log byte axis from lo to hi: powers of two first, then 1.5 times them, then 1.25 and
    1.75 times, each kept only when at least `gap` of the axis's width from every tick kept before."""
    span = math.log(hi / lo)
    kept = []
    for subs in ((1.0,), (1.5,), (1.25, 1.75)):
        n = math.floor(math.log2(max(1.0, lo)))
        while 2.0 ** n <= hi:
            for m in subs:
                t = m * 2.0 ** n
                if lo <= t <= hi and all(abs(math.log(t / k)) >= gap * span for k in kept):
                    kept.append(t)
            n += 1
    return sorted(kept)


def _tick_label(v):
    """A byte tick's label, short: 16 MiB, 1.5 GiB, 512 KiB."""
    for unit, size in (("GiB", 1024.0 ** 3), ("MiB", 1024.0 ** 2), ("KiB", 1024.0)):
        if v >= size:
            return f"{round(v / size, 2):g} {unit}"
    return f"{v:g} B"


def draw_figures(plans_list):
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
        pl.figure = (name, f"Predicted memory vs recompute: {pl.short_model}",
                     "Predicted from the profiled chain costs, not measured. The line is the optimal policy swept "
                     "over budgets from the smallest feasible to store-all's peak (a step function of the budget; "
                     "dots at the peaks it reaches); markers are the policies at their planned peaks, filled when "
                     "PyTorch can apply them as a per-module placement, hollow when not. Left: FLOP overhead; "
                     "right: predicted time overhead (the recomputed blocks' measured forward time ÷ the plain "
                     "step). The shaded band is below the smallest feasible budget; the dashed red line is the "
                     "budget and the red star the cheapest policy under it, when a budget is given.",
                     _draw(pl, plt, color_for))


def _draw(pl, plt, color_for):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    xs = [pl.store_all_peak, pl.min_feasible] + [p.peak for p in pl.policies] + [p.peak for p in pl.frontier]
    xs += [p.budget for p in pl.frontier] + ([pl.budget] if pl.budget is not None else [])
    xs = [x for x in xs if x > 0]
    lo, hi = (min(xs), max(xs)) if xs else (1, 2)
    log = bool(xs) and hi / lo > 1.0
    left, right = (lo / 1.06, hi * 1.06) if log else (0, hi * 1.06 + 1)
    markers = "os^vD<>ph*"
    legend = []  # the FLOP panel's handles: every policy has a FLOP overhead, not every one a predicted time
    for ax, attr, ylabel, title in (
            (axes[0], "flop_overhead", "FLOP overhead (recompute / (fwd + bwd))", "FLOP overhead (predicted)"),
            (axes[1], "time_overhead", "time overhead (recomputed fwd time / plain step)",
             "Time overhead (predicted)")):
        handles = []
        if pl.min_feasible > left:
            ax.axvspan(left, pl.min_feasible, color="0.88", lw=0, zorder=0)
            below = f"below the smallest feasible budget ({fmt_bytes(pl.min_feasible)})"
            handles.append(Patch(color="0.88", label=below))
        front = [p for p in pl.frontier if getattr(p, attr) is not None]
        if front:
            ax.step([p.budget for p in front], [getattr(p, attr) for p in front], where="post", color="0.25", lw=1.5,
                    zorder=2)
            ax.plot([p.peak for p in front], [getattr(p, attr) for p in front], ls="none", marker=".", color="0.25",
                    ms=4, zorder=2)
            handles.append(Line2D([], [], color="0.25", lw=1.5, marker=".", ms=4, label="optimal frontier"))
        for i, p in enumerate(pl.policies):
            y = getattr(p, attr)
            label = p.policy + ("" if p.expressible else " (not per-module)")
            if y is None:
                handles.append(Line2D([], [], ls="none", marker=markers[i % len(markers)], ms=7, mew=1.5,
                                      color=color_for(i), mfc=color_for(i) if p.expressible else "none", label=label))
                continue
            # A policy at the same point as earlier ones is drawn smaller, on top, so each stays visible.
            same = sum(1 for q in pl.policies[:i] if (q.peak, getattr(q, attr)) == (p.peak, y))
            h, = ax.plot([p.peak], [y], ls="none", marker=markers[i % len(markers)], ms=max(3.0, 7.0 - 2.0 * same),
                         mew=1.5, color=color_for(i), mfc=color_for(i) if p.expressible else "none", zorder=3,
                         label=label)
            handles.append(h)
        if pl.budget is not None:
            ax.axvline(pl.budget, color="tab:red", ls="--", lw=1.2, zorder=1)
            handles.append(Line2D([], [], color="tab:red", ls="--", lw=1.2, label=f"budget {fmt_bytes(pl.budget)}"))
            c = pl.cheapest
            if c is not None and getattr(c, attr) is not None:
                h, = ax.plot([c.peak], [getattr(c, attr)], ls="none", marker="*", ms=17, mfc="none", mec="tab:red",
                             mew=1.4, zorder=4, label=f"cheapest under the budget: {c.policy}")
                handles.append(h)
        if not any(getattr(p, attr) is not None for p in pl.policies + pl.frontier):
            ax.text(0.5, 0.5, "no time overhead predicted", transform=ax.transAxes, ha="center", va="center",
                    color="0.4", bbox={"fc": "white", "ec": "none"})
        if not legend:
            legend = handles
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
    fig.suptitle(f"{pl.model} ({pl.framework}, batch {pl.batch_size}, {pl.layers} blocks): predicted", fontsize=9)
    fig.legend(handles=legend, fontsize=6.5, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False,
               title="filled: per-module placement", title_fontsize=6.5)
    fig.tight_layout()
    return svg_of(plt, fig)
