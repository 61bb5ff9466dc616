#!/usr/bin/env python3
"""The overhead report: bench_engine's Google Benchmark JSON (and optionally `ckptcheck verify --json`) into
DIR/report.md, a self-contained DIR/report.html and the figures (DIR/fig-*.svg, embedded in the HTML).

`ckptcheck report` runs this script; it can also be run directly:
    /usr/bin/python3 reports/make_report.py --bench bench.json [--verify verify.json] --out DIR [--print-summary]

Deterministic: the same inputs give byte-identical outputs (no timestamps, fixed SVG ids and metadata, inputs
read in order). Every file is written to a temporary name and renamed into place.
Exit codes as ckptcheck's: 0 written, 1 written but --check found a failed verification, 2 bad input (one line
naming what), 3 missing dependency or I/O error.
"""
import argparse
import base64
import html
import io
import json
import math
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import user_models  # noqa: E402

EXIT_OK, EXIT_FINDING, EXIT_BAD_INPUT, EXIT_INFRA = 0, 1, 2, 3

ENGINE_TAX_GOAL = 0.03          # the goal for every policy on the catalogue
FULL_RECOMPUTE_THEORY = 1.0 / 3  # recomputing every forward once: F / (F + B) with B = 2F
MIB = 1024.0 * 1024.0


class BadInput(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------
# Reading the inputs


def load_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise BadInput(f"{what} '{path}': no such file")
    except json.JSONDecodeError as e:
        raise BadInput(f"{what} '{path}': not JSON ({e.msg} at line {e.lineno})")
    except OSError as e:
        raise BadInput(f"{what} '{path}': {e.strerror}")


def base_name(name):
    """A benchmark's name without Google Benchmark's suffixes (manual_time, aggregates)."""
    for suffix in ("_mean", "_median", "_stddev", "_cv"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return re.sub(r"/(manual_time|real_time|process_time|(repeats|iterations|threads):\d+|min_time:[0-9.]+s?|"
                  r"min_warmup_time:[0-9.]+s?)(?=/|$)", "", name)


def counter(entry, key, default=None):
    v = entry.get(key, default)
    if v is None:
        return default
    return v


class Bench:
    """Benchmark runs grouped by name; repetitions are folded into the median of each field."""

    def __init__(self):
        self.context = {}
        self.runs = {}      # base name -> merged entry (dict)
        self.order = []     # base names in first-seen order
        self.errors = []    # (name, message)

    def add_file(self, path):
        doc = load_json(path, "benchmark JSON")
        if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
            raise BadInput(f"benchmark JSON '{path}': no 'benchmarks' list (was it written with "
                           f"--benchmark_out_format=json?)")
        ctx = doc.get("context", {})
        if isinstance(ctx, dict):
            for k, v in ctx.items():
                self.context.setdefault(k, v)
        grouped = {}
        for i, b in enumerate(doc["benchmarks"]):
            if not isinstance(b, dict) or not isinstance(b.get("name"), str):
                raise BadInput(f"benchmark JSON '{path}': benchmarks[{i}] has no name")
            if b.get("run_type", "iteration") != "iteration":
                continue  # aggregates are recomputed below from the repetitions
            name = base_name(b.get("run_name", b["name"]))
            if b.get("error_occurred"):
                self.errors.append((name, str(b.get("error_message", "error"))))
                continue
            grouped.setdefault(name, []).append(b)
        for name, entries in grouped.items():
            merged = dict(entries[0])
            for k, v in entries[0].items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and len(entries) > 1:
                    vals = [e[k] for e in entries if isinstance(e.get(k), (int, float))]
                    merged[k] = statistics.median(vals)
            merged["repetitions_folded"] = len(entries)
            if name not in self.runs:
                self.order.append(name)
            self.runs[name] = merged

    def family(self, prefix):
        out = []
        for name in self.order:
            parts = name.split("/", 2)
            if parts[0] == prefix and len(parts) == 3:
                out.append((parts[1], parts[2], self.runs[name]))
        return out


def need(entry, key, name):
    v = entry.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise BadInput(f"benchmark '{name}': counter '{key}' missing or not a number")
    return v


class StepRow:
    def __init__(self, case, policy, e):
        name = f"BM_Step/{case}/{policy}"
        self.case = case
        self.policy = policy  # as registered (defaultPolicies' string); the label has the schedule's own
        label = e.get("label", "")
        self.display = label.split(" ", 1)[1] if label.startswith(case + " ") else policy
        self.layers = int(need(e, "layers", name))
        self.peak = int(need(e, "peak_activation_bytes", name))
        self.store_all_peak = int(need(e, "store_all_peak_activation_bytes", name))
        self.forward_evals = int(need(e, "forward_evals", name))
        self.flops_forward = int(need(e, "flops_forward", name))
        self.flops_recompute = int(need(e, "flops_recompute", name))
        self.flops_backward = int(need(e, "flops_backward", name))
        self.flop_overhead = float(need(e, "flop_overhead", name))
        self.time_ratio = float(need(e, "time_overhead", name))
        self.q1 = float(e.get("time_overhead_q1", self.time_ratio))
        self.q3 = float(e.get("time_overhead_q3", self.time_ratio))
        self.step_seconds = float(e.get("step_seconds", 0.0))
        self.store_all_seconds = float(e.get("store_all_step_seconds", 0.0))
        self.samples = int(e.get("samples", 0))
        self.planned_ok = e.get("planned_equals_measured", 1) == 1
        self.bitwise = e.get("bitwise_equal")  # None: not checked by this bench
        share = e.get("recompute_time_share")
        self.recompute_share = None if share is None else float(share)
        # Per op kind: (recompute time as a fraction of the reference step, recompute FLOP share).
        self.recompute_kinds = {}
        for k, v in e.items():
            if k.startswith("recompute_time_share."):
                kind = k.split(".", 1)[1]
                self.recompute_kinds[kind] = (float(v) * self.time_ratio,
                                              float(e.get("recompute_flop_share." + kind, 0.0)))
        self.verdict = None

    @property
    def memory_ratio(self):
        return self.peak / self.store_all_peak if self.store_all_peak else float("nan")

    @property
    def engine_tax(self):
        return self.time_ratio - (1.0 + self.flop_overhead)

    @property
    def op_cost_tax(self):
        """Engine tax from the recomputed ops themselves: their time (in reference steps) minus their FLOP share."""
        return None if self.recompute_share is None else self.time_ratio * self.recompute_share - self.flop_overhead

    @property
    def rest_tax(self):
        """Engine tax from everything but the recomputed ops: executor bookkeeping, allocation, cache effects."""
        return None if self.recompute_share is None else self.time_ratio * (1.0 - self.recompute_share) - 1.0

    @property
    def is_full_recompute(self):
        return self.display == f"uniform:k={self.layers}" or self.policy == f"uniform:k={self.layers}"


class FrontierPoint:
    def __init__(self, case, e, name):
        self.case = case
        self.budget = int(need(e, "budget_bytes", name))
        self.peak = int(need(e, "peak_activation_bytes", name))
        self.flops_recompute = int(need(e, "flops_recompute", name))
        self.flop_overhead = float(need(e, "flop_overhead", name))
        self.forward_evals = int(need(e, "forward_evals", name))
        self.store_all_peak = int(e.get("store_all_peak_activation_bytes", 0))
        self.seconds = seconds_of(e)


class PlannerPoint:
    def __init__(self, fam, e, name):
        self.family = fam
        self.policy = e.get("label") or fam
        self.layers = int(need(e, "layers", name))
        self.peak = int(need(e, "peak_activation_bytes", name))
        self.forward_evals = int(need(e, "forward_evals", name))
        self.flop_overhead = float(e.get("flop_overhead", 0.0))
        self.seconds = seconds_of(e)


def seconds_of(e):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}.get(e.get("time_unit", "ns"), 1e-9)
    return float(e.get("real_time", 0.0)) * scale


# ---------------------------------------------------------------------------------------------------------------
# Verdicts: each BM_Step run checks its own step bitwise (counter bitwise_equal); `ckptcheck verify --json` adds
# every step, every property, random cases, and a finding when one breaks.


def family_of(policy):
    """'uniform:k=8+selective' -> 'uniform+selective'; 'revolve:slots=3' -> 'revolve'."""
    parts = [p.split(":")[0] for p in str(policy).split("+")]
    return "+".join(parts)


class Verify:
    def __init__(self, doc, path):
        if not isinstance(doc, dict) or not isinstance(doc.get("findings", []), list):
            raise BadInput(f"verify JSON '{path}': not the output of `ckptcheck verify --json` (no 'findings' list)")
        self.doc = doc
        self.findings = [f for f in doc.get("findings", []) if isinstance(f, dict)]
        self.ok = bool(doc.get("ok", not self.findings))
        self.catalogue_cases = doc.get("catalogue_cases")

    def finding_for(self, case, policy):
        """The finding on this catalogue case and policy family, if any."""
        for f in self.findings:
            origin = str(f.get("origin", ""))
            if origin == f"catalogue case {case}" and family_of(f.get("policy", "")) == family_of(policy):
                return f
        return None

    def summary_line(self):
        d = self.doc
        props = d.get("properties", [])
        held = [p for p in props if isinstance(p, dict) and p.get("holds")]
        engine = d.get("engine", "correct")
        s = "`ckptcheck verify`" + ("" if engine == "correct" else f" of the broken engine '{engine}'")
        s += (f": seed {d.get('seed', '?')}, {d.get('cases_run', '?')} cases ({d.get('random_cases', '?')} random, "
             f"{d.get('catalogue_cases', '?')} catalogue), {d.get('policy_runs', '?')} case × policy runs")
        cpm = d.get("cases_per_minute")
        if isinstance(cpm, (int, float)):
            s += f", {cpm:.0f} random cases per minute"
        if props:
            s += "; properties " + ", ".join(
                f"{p.get('number')} {p.get('id', '')} {'held' if p.get('holds') else 'VIOLATED'} "
                f"({p.get('checked', '?')} checked)" for p in props if isinstance(p, dict))
        s += f"; {len(self.findings)} finding{'s' if len(self.findings) != 1 else ''}"
        if len(held) == len(props) and not self.findings:
            s += " — all hold"
        return s + "."


class Frameworks:
    """`ckptcheck validate --timing-case ... --json` outputs: another framework's step-time overhead of
    checkpointing next to ckptcheck's own engine with the same segmenting, measured in the same run."""

    def __init__(self):
        self.rows = []
        self.user_rows = []  # `validate --adapter torch:module=...` reports (reports/user_models.py)

    def add(self, doc, path):
        if user_models.is_user_model(doc):
            self.user_rows += user_models.rows(doc, path, BadInput)
            return
        if not isinstance(doc, dict) or not isinstance(doc.get("timing"), list):
            raise BadInput(f"frameworks JSON '{path}': not the output of `ckptcheck validate --timing-case ... --json` "
                           f"(no 'timing' list)")
        version = str(doc.get("adapter", {}).get("version", "")) if isinstance(doc.get("adapter"), dict) else ""
        for t in doc["timing"]:
            try:
                fw, ck = t["framework"], t["ckptcheck"]
                row = {"case": str(t["case"]), "blocks": int(t["blocks"]), "segments": int(t["segments"]),
                       "framework": f"{fw['name']} {version}".strip(),
                       "options": ",".join(f"{k}={v}" for k, v in sorted(fw.get("options", {}).items())),
                       "fw_plain": float(fw["plain_step_ms"]), "fw_ckpt": float(fw["checkpoint_step_ms"]),
                       "fw_overhead": float(fw["overhead"]), "fw_bitwise": bool(fw.get("bitwise_equal", False)),
                       "policy": str(ck["policy"]), "ck_plain": float(ck["plain_step_ms"]),
                       "ck_ckpt": float(ck["checkpoint_step_ms"]), "ck_overhead": float(ck["overhead"])}
            except (KeyError, TypeError, ValueError) as e:
                raise BadInput(f"frameworks JSON '{path}': a timing entry lacks or mistypes {e}")
            self.rows.append(row)


# ---------------------------------------------------------------------------------------------------------------
# Formatting (one place, so the tables, the summary and the terminal agree)


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


# ---------------------------------------------------------------------------------------------------------------
# Analysis


class Report:
    def __init__(self, bench, verify, frameworks=None):
        self.frameworks = frameworks.rows if frameworks is not None else []
        self.user_models = frameworks.user_rows if frameworks is not None else []
        self.bench = bench
        self.verify = verify
        self.cases = []  # names in bench order
        self.steps = {}  # case -> [StepRow]
        for case, policy, e in bench.family("BM_Step"):
            row = StepRow(case, policy, e)
            row.verdict = verdict(row, verify)
            if case not in self.steps:
                self.cases.append(case)
                self.steps[case] = []
            self.steps[case].append(row)
        self.frontier = {}
        for case, _, e in bench.family("BM_Frontier"):
            self.frontier.setdefault(case, []).append(FrontierPoint(case, e, f"BM_Frontier/{case}"))
        for pts in self.frontier.values():
            pts.sort(key=lambda p: p.budget)
        for c in self.frontier:
            if c not in self.steps:
                self.cases.append(c)
        self.planner = {}
        for fam, layers, e in bench.family("BM_Planner"):
            self.planner.setdefault(fam, []).append(PlannerPoint(fam, e, f"BM_Planner/{fam}/{layers}"))
        for pts in self.planner.values():
            pts.sort(key=lambda p: p.layers)
        if not self.steps and not self.frontier and not self.planner:
            raise BadInput("benchmark JSON: no BM_Step, BM_Planner or BM_Frontier runs (is it bench_engine's output?)")

    def optimal_at(self, case, budget):
        """Optimal's point at this budget: exact when the bench swept it, else the largest budget below (an upper
        bound on optimal's recompute at `budget`). Returns (point, exact) or (None, False)."""
        best = None
        for p in self.frontier.get(case, []):
            if p.budget <= budget:
                best = p
        if best is None:
            return None, False
        return best, best.budget == budget

    def frontier_status(self, row):
        """(text, on_frontier) for a step row against the optimal policy at the row's own peak."""
        opt, exact = self.optimal_at(row.case, row.peak)
        if opt is None:
            return "no optimal point at or below its peak", None
        diff = row.flops_recompute - opt.flops_recompute
        if diff == 0 and exact:
            return "on the frontier", True
        if diff <= 0 and exact:
            return (f"below the block-level frontier by {fmt_overhead(-diff / max(1, row.flops_forward + row.flops_backward))} "
                    f"FLOP overhead (op-level recompute is outside the DP's family)"), True
        if diff <= 0:
            return "at or below the sampled frontier", True
        base = max(1, row.flops_forward + row.flops_backward)
        return (f"{fmt_overhead(diff / base)} FLOP overhead above optimal at the same budget "
                f"({fmt_overhead(opt.flop_overhead)})"), False

    def all_rows(self):
        for c in self.cases:
            for r in self.steps.get(c, []):
                yield r

    def tax_by_policy(self):
        """policy family -> [engine tax over cases], in first-seen order."""
        out = {}
        for r in self.all_rows():
            out.setdefault(policy_family(r), []).append(r)
        return out


def verdict(row, verify):
    """'equal', 'DIFFERS (...)' or None (nothing checked it)."""
    f = verify.finding_for(row.case, row.policy) if verify is not None else None
    if f is not None:
        return f"DIFFERS (verify: property {f.get('property', '?')})"
    if row.bitwise is not None and not row.bitwise:
        return "DIFFERS (step 0)"
    if row.bitwise is None and verify is None:
        return None
    return "equal"


def policy_family(row):
    if row.is_full_recompute:
        return "full recompute (uniform:k=L)"
    p = row.policy
    base = p.split("+")[0]
    name = base.split(":")[0]
    return name + ("+selective" if "+selective" in p else "")


# ---------------------------------------------------------------------------------------------------------------
# Figures (matplotlib, SVG with fixed ids and no date)


def figures(rep):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("matplotlib is not installed for " + sys.executable + " (run ci/setup, or set CKPT_REPORT_PYTHON "
                           "to a Python that has it)")
    matplotlib.rcParams.update({
        "svg.hashsalt": "ckptcheck-report",
        "svg.fonttype": "none",
        "font.family": "DejaVu Sans",
        "font.size": 9,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "figure.dpi": 100,
        "path.simplify": False,
    })
    palette = matplotlib.colormaps["tab10"].colors
    figs = []

    def color_for(i):
        return palette[i % len(palette)]

    def save(fig, name, title, caption):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "ckptcheck report"}, bbox_inches="tight")
        plt.close(fig)
        figs.append((name, title, caption, buf.getvalue()))

    # 1. Peak memory vs L per policy, log-log, with sqrt(L) and log(L) guides; forward evaluations per layer.
    if rep.planner:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        fams = list(rep.planner)
        for i, fam in enumerate(fams):
            pts = rep.planner[fam]
            xs = [p.layers for p in pts]
            ax.plot(xs, [p.peak for p in pts], marker="o", ms=3, lw=1.4, color=color_for(i), label=fam)
            ax2.plot(xs, [p.forward_evals / p.layers for p in pts], marker="o", ms=3, lw=1.4, color=color_for(i), label=fam)
        guide_l = sorted({p.layers for pts in rep.planner.values() for p in pts})
        if len(guide_l) >= 2:
            def anchor(fam_name):
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
                ax.plot(guide_l, [c * math.log2(x) for x in guide_l], ls=":", color="0.2", lw=1.2, label="∝ log L (guide)")
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
        save(fig, "fig-memory-vs-layers", "Peak memory vs L",
             "Planner only, homogeneous chains of the scaling block (bench_engine: mlp-deep's first block). Slope "
             "guides at half height: dashed ∝ √L (uniform's largest L), dotted ∝ log L (recursive's largest L). "
             "Optimal is planned up to the L its O(L² × levels) DP allows in the mode.")

    # 2. Memory vs recompute FLOPs per case: the optimal frontier and every policy on it.
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
                ax.plot([p.peak for p in pts], [p.flop_overhead for p in pts], ls="none", marker=".", color="0.25", ms=4, zorder=2)
            for i, r in enumerate(rep.steps.get(case, [])):
                ax.plot([r.peak], [r.flop_overhead], ls="none", marker="os^vD<>ph*"[i % 10], ms=7, mfc="none", mew=1.5,
                        color=color_for(i), label=r.display, zorder=3)
            ax.set_xscale("log")
            ax.set_xlabel("peak activation bytes")
            ax.set_ylabel("FLOP overhead (recompute / (fwd + bwd))")
            ax.set_title(case)
            ax.legend(fontsize=6.5, loc="upper right")
        for k in range(len(cases), nrow * ncol):
            axes[k // ncol][k % ncol].set_visible(False)
        fig.tight_layout()
        save(fig, "fig-frontier", "Memory vs recompute per case",
             "The line is the optimal policy swept over budgets from the smallest feasible to store-all's peak (step "
             "function of the budget); markers are the policies at their own peaks.")

    # 3. Measured vs theoretical overhead per policy, and the engine tax split per policy.
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
                ax.errorbar([r.flop_overhead], [r.time_ratio - 1.0],
                            yerr=[[max(0.0, r.time_ratio - r.q1)], [max(0.0, r.q3 - r.time_ratio)]],
                            ls="none", marker=markers[ci % len(markers)], ms=6, mfc="none", mew=1.3, capsize=2,
                            color=color_for(i), label=fam if j == 0 else None)
        lim = max([0.45] + [r.flop_overhead for r in rows] + [r.time_ratio - 1.0 for r in rows]) * 1.08
        low = min([0.0] + [r.time_ratio - 1.0 for r in rows]) - 0.03
        ax.plot([0, lim], [0, lim], color="0.3", lw=1, label="engine tax 0 (time = FLOP theory)")
        ax.plot([0, lim], [ENGINE_TAX_GOAL, lim + ENGINE_TAX_GOAL], color="0.3", lw=1, ls=":",
                label=f"engine tax {ENGINE_TAX_GOAL} (goal)")
        ax.axvline(FULL_RECOMPUTE_THEORY, color="tab:red", lw=1, ls="--")
        ax.axhline(FULL_RECOMPUTE_THEORY, color="tab:red", lw=1, ls="--", label="full recomputation, theory 33%")
        ax.set_xlim(-0.02, lim)
        ax.set_ylim(low, lim)
        ax.set_xlabel("theoretical overhead: FLOP overhead")
        ax.set_ylabel("measured overhead: time ratio − 1")
        ax.set_title("Measured vs theoretical (markers: " +
                     ", ".join(f"{markers[i % len(markers)]} {c}" for i, c in enumerate(rep.cases)) + ")", fontsize=8)
        ax.legend(fontsize=6.5, loc="upper left")
        if split:
            ys = list(range(len(fams)))
            ex = [median_of([r.rest_tax for r in rows if policy_family(r) == f]) or 0.0 for f in fams]
            oc = [median_of([r.op_cost_tax for r in rows if policy_family(r) == f]) or 0.0 for f in fams]
            ax2.barh([y - 0.2 for y in ys], oc, height=0.38, color="tab:orange",
                     label="recomputed ops beyond their FLOP share")
            ax2.barh([y + 0.2 for y in ys], ex, height=0.38, color="tab:blue",
                     label="rest: executor, allocation, cache")
            ax2.axvline(ENGINE_TAX_GOAL, color="0.3", ls=":", lw=1, label=f"goal {ENGINE_TAX_GOAL}")
            ax2.axvline(0, color="0.3", lw=0.8)
            ax2.set_yticks(ys)
            ax2.set_yticklabels(fams, fontsize=7)
            ax2.invert_yaxis()
            ax2.set_xlabel("median over cases")
            ax2.set_title("Engine tax split per policy")
            ax2.legend(fontsize=6.5, loc="lower right")
        fig.tight_layout()
        save(fig, "fig-overhead", "Measured vs theoretical overhead",
             "Left: each marker is a (case, policy); error bars span the interquartile range of the interleaved "
             "samples; the height above the solid diagonal is the engine tax. Right: the engine tax split into what "
             "the recomputed ops cost beyond their FLOP share and everything else (see Engine tax per policy).")
    return figs


def svg_clean(svg):
    """The SVG without its XML prolog (same bytes every run: no date, fixed id salt)."""
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    return svg


# ---------------------------------------------------------------------------------------------------------------
# Text: tables and the summary


STEP_HEADER = ["policy", "peak activation", "bytes", "× store-all", "forward evals", "FLOP overhead",
               "time ratio (IQR)", "engine tax", "recomputed ops", "rest", "frontier", "bitwise"]


def opt_tax(x):
    return "—" if x is None else fmt_tax(x)


def step_cells(rep, r):
    flag = rep.frontier_status(r)[1] if rep.frontier.get(r.case) else None
    frontier = {True: "on", False: "off", None: "—"}[flag]
    bitwise = r.verdict if r.verdict is not None else "—"
    if not r.planned_ok:
        bitwise += " (measured ≠ planned)"
    name = r.display + (" (full recompute)" if r.is_full_recompute else "")
    return [name, fmt_bytes(r.peak), str(r.peak), fmt_ratio(r.memory_ratio), str(r.forward_evals),
            fmt_overhead(r.flop_overhead), f"{fmt_ratio(r.time_ratio)} ({fmt_ratio(r.q1)}–{fmt_ratio(r.q3)})",
            fmt_tax(r.engine_tax), opt_tax(r.op_cost_tax), opt_tax(r.rest_tax), frontier, bitwise]


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(out)


def case_summary(rep, case):
    """Sentences with numbers: where the frontier runs and which policy is on it at which budget. Numbers in
    brackets are FLOP overheads."""
    rows = rep.steps.get(case, [])
    pts = rep.frontier.get(case, [])
    parts = []
    head = []
    if rows:
        head.append(f"{rows[0].layers} blocks, store-all {fmt_bytes(rows[0].store_all_peak)}")
    if pts:
        least = pts[0]
        share = f" ({fmt_pct(least.budget / least.store_all_peak)} of store-all)" if least.store_all_peak else ""
        head.append(f"the optimal frontier runs from {fmt_bytes(least.budget)}{share} at "
                    f"{fmt_overhead(least.flop_overhead)} to no recompute at {fmt_bytes(pts[-1].budget)}")
        free = next((p for p in pts if p.flops_recompute == 0), None)
        if free is not None and free.store_all_peak and free.budget < free.store_all_peak:
            head.append(f"recompute is free from {fmt_bytes(free.budget)}")
    if head:
        parts.append("; ".join(head) + ".")
    on, below, off = [], [], []
    for r in rows if pts else []:
        opt, exact = rep.optimal_at(r.case, r.peak)
        if opt is None:
            continue
        item = f"{r.display} at {fmt_bytes(r.peak)} ({fmt_overhead(r.flop_overhead)}"
        if r.flops_recompute == opt.flops_recompute and exact:
            on.append(item + ")")
        elif r.flops_recompute < opt.flops_recompute:
            below.append(item + f" vs optimal's {fmt_overhead(opt.flop_overhead)})")
        else:
            off.append(item + f" vs optimal's {'≤ ' if not exact else ''}{fmt_overhead(opt.flop_overhead)})")
    if on:
        parts.append("On the frontier: " + ", ".join(on) + ".")
    if below:
        parts.append("Below the block-level frontier (op-level recompute, outside the optimal DP's family): "
                     + ", ".join(below) + ".")
    if off:
        parts.append("Off it, recomputing more than optimal at the same budget: " + ", ".join(off) + ".")
    return " ".join(parts)


def median_of(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def tax_rows(rep):
    out = []
    for fam, rs in rep.tax_by_policy().items():
        worst = max(rs, key=lambda r: r.engine_tax)
        ok = all(r.engine_tax <= ENGINE_TAX_GOAL for r in rs)
        out.append([fam, str(len(rs)), fmt_tax(statistics.median([r.engine_tax for r in rs])),
                    f"{fmt_tax(worst.engine_tax)} ({worst.case})", "yes" if ok else "no",
                    opt_tax(median_of([r.op_cost_tax for r in rs])), opt_tax(median_of([r.rest_tax for r in rs]))])
    return out


TAX_HEADER = ["policy", "cases", "median engine tax", "worst (case)", f"≤ {ENGINE_TAX_GOAL} everywhere",
              "median recomputed-ops part", "median rest"]

TAX_NOTE = ("The engine tax splits exactly in two. bench_engine clocks, in separate instrumented steps, the time spent "
            "inside the forward calls of recomputed ops (share *s* of the policy's step). *Recomputed ops* = time ratio "
            "× s − FLOP overhead: what the recomputation costs beyond its FLOP share, because element-wise ops "
            "(Philox dropout, libm GELU/tanh, attention's softmax) take far more time per FLOP than the matrix "
            "products that dominate the FLOP count. *Rest* = time ratio × (1 − s) − 1: everything else the step "
            "spends beyond the reference step — the executor's bookkeeping, allocation and page faults, and cache "
            "effects (a recomputed tape is hot in cache when its backward runs, which can make this negative). The "
            "store-all row runs the reference's own instructions through the executor: its tax is the executor's "
            "fixed cost.")


def full_recompute_rows(rep):
    out = []
    for r in rep.all_rows():
        if r.is_full_recompute:
            ops = "—" if r.recompute_share is None else fmt_pct(r.time_ratio * r.recompute_share)
            out.append([r.case, fmt_pct(r.time_ratio - 1.0), ops, fmt_pct(r.flop_overhead),
                        fmt_pct(FULL_RECOMPUTE_THEORY), fmt_tax(r.engine_tax)])
    return out


FULL_HEADER = ["case", "measured overhead", "time in recomputed ops", "FLOP overhead (this model)",
               "textbook theory", "engine tax"]


def recompute_kind_rows(rep):
    """Per case, the full-recompute row's recompute time and FLOPs per op kind."""
    out = []
    for r in rep.all_rows():
        if not r.is_full_recompute or not r.recompute_kinds:
            continue
        for kind, (t, f) in sorted(r.recompute_kinds.items(), key=lambda kv: -kv[1][0]):
            per = f"{t / f:.1f}" if f > 0 else "—"
            out.append([r.case, kind, fmt_pct(t), fmt_pct(f), per])
    return out


KIND_HEADER = ["case", "op kind", "recompute time (% of reference step)", "recompute FLOPs (% of step FLOPs)",
               "time ÷ FLOP share"]


def planner_rows(rep):
    layers = sorted({p.layers for pts in rep.planner.values() for p in pts})
    fams = list(rep.planner)
    rows = []
    for L in layers:
        row = [str(L)]
        for f in fams:
            p = next((p for p in rep.planner[f] if p.layers == L), None)
            row.append(f"{fmt_bytes(p.peak)} / {p.forward_evals} / {fmt_time(p.seconds)}" if p else "—")
        rows.append(row)
    return ["L"] + fams, rows


def context_lines(rep):
    c = rep.bench.context
    keys = [("git_commit", "commit"), ("ckpt_mode", "benchmark mode"), ("compiler", "compiler"),
            ("build_type", "build"), ("cpu", "CPU"), ("num_cpus", "cores")]
    out = [f"{label}: {c[k]}" for k, label in keys if k in c]
    load = c.get("load_avg")
    if isinstance(load, list) and load:
        cores = c.get("num_cpus") or 1
        note = f"load average at start: {', '.join(f'{x:.2f}' for x in load)}"
        if load[0] > cores:
            note += (f" (above the {cores} cores: other work shared the machine; steps are timed in thread CPU time "
                     f"and interleaved, which cancels being descheduled and slow drift, but not the cache and memory "
                     f"bandwidth other work takes, so ratios are noisier than on an idle machine)")
        out.append(note)
    return out


def headline(rep):
    lines = []
    rows = list(rep.all_rows())
    if rows:
        worst = max(rows, key=lambda r: r.engine_tax)
        over = [r for r in rows if r.engine_tax > ENGINE_TAX_GOAL]
        s = (f"Engine tax (time ratio − (1 + FLOP overhead)) over {len(rows)} case × policy runs: median "
             f"{fmt_tax(statistics.median([r.engine_tax for r in rows]))}, worst {fmt_tax(worst.engine_tax)} "
             f"({worst.display} on {worst.case}); goal ≤ {ENGINE_TAX_GOAL}: "
             + ("met everywhere." if not over else f"not met in {len(over)} of {len(rows)}."))
        ops = [r.op_cost_tax for r in rows if r.op_cost_tax is not None]
        if ops:
            rest = [r.rest_tax for r in rows if r.rest_tax is not None]
            store = [r for r in rows if r.policy == "store-all"]
            s += (f" Split: recomputed ops costing more time than their FLOP share, median {fmt_tax(statistics.median(ops))}; "
                  f"everything else (executor, allocation, cache), median {fmt_tax(statistics.median(rest))}")
            if store:
                s += (f"; the executor running store-all's own schedule: "
                      + ", ".join(f"{fmt_tax(r.engine_tax)} ({r.case})" for r in store))
            s += "."
        lines.append(s)
    fr = [r for r in rows if r.is_full_recompute]
    if fr:
        lines.append("Full recomputation (a checkpoint at every block boundary, every block recomputed once) costs "
                     + ", ".join(f"{fmt_pct(r.time_ratio - 1.0)} on {r.case} (FLOPs: {fmt_pct(r.flop_overhead)})"
                                 for r in fr)
                     + f", against the textbook {fmt_pct(FULL_RECOMPUTE_THEORY)}.")
    checked = [r for r in rows if r.verdict is not None]
    if checked:
        differs = [r for r in checked if r.verdict.startswith("DIFFERS")]
        s = f"Bitwise: {len(checked) - len(differs)} of {len(checked)} benchmarked case × policy steps equal to the reference"
        s += (", DIFFERS: " + ", ".join(f"{r.case}/{r.display}" for r in differs) + ".") if differs else "."
        lines.append(s)
    if rep.verify is not None:
        lines.append(rep.verify.summary_line())
    bad = [r for r in rows if not r.planned_ok]
    if bad:
        lines.append("Measured ≠ planned in: " + ", ".join(f"{r.case}/{r.display}" for r in bad) + ".")
    return lines


def findings_lines(rep):
    out = []
    if rep.verify is None:
        return out
    for f in rep.verify.findings:
        parts = [f"property {f.get('property', '?')} ({f.get('property_id', '')})", str(f.get("origin", "")),
                 f"policy {f.get('policy', '?')}", str(f.get("message", ""))]
        if f.get("replay"):
            parts.append(f"replay: {f['replay']}")
        out.append("; ".join(p for p in parts if p))
    return out


DEFINITIONS = ("Definitions: *FLOP overhead* = recompute FLOPs / (forward + backward FLOPs of the store-all step); "
               "*time ratio* = policy step time / reference store-all step time (thread CPU time, median of "
               "interleaved samples; IQR in brackets); *engine tax* = time ratio − (1 + FLOP overhead), split into "
               "*recomputed ops* (their time beyond their FLOP share) and *rest* (everything else: executor, "
               "allocation, cache; see Engine tax per policy); *frontier*: on = no more recompute than the optimal "
               "policy at the same budget; *bitwise*: loss, every gradient and all state after the step bitwise equal "
               "to the reference (the bench's own step and, when given, `ckptcheck verify`).")


FRAMEWORK_HEADER = ["case", "blocks", "K", "framework", "options", "plain ms", "checkpointed ms", "overhead",
                    "bitwise", "ckptcheck policy", "reference ms", "engine ms", "ckptcheck overhead"]


def framework_rows(rep):
    return [[r["case"], str(r["blocks"]), str(r["segments"]), r["framework"], r["options"] or "-",
             f"{r['fw_plain']:.2f}", f"{r['fw_ckpt']:.2f}", fmt_overhead(r["fw_overhead"]),
             "equal" if r["fw_bitwise"] else "DIFFERS", r["policy"], f"{r['ck_plain']:.2f}", f"{r['ck_ckpt']:.2f}",
             fmt_overhead(r["ck_overhead"])] for r in rep.frameworks]


def document(rep, figs):
    """The report as blocks both renderers share: (kind, ...) with kind h1, h2, h3, p, ul, table, figure."""
    d = [("h1", "ckptcheck overhead report"), ("h2", "Summary"), ("ul", headline(rep))]
    per_case = [f"**{c}**: {case_summary(rep, c)}" for c in rep.cases if case_summary(rep, c)]
    if per_case:
        d += [("p", "Per case: which policy is on the memory/recompute frontier at which budget (FLOP overheads in "
                    "brackets; the optimal policy at a policy's own peak is the comparison)."), ("ul", per_case)]
    d += [("h2", "Run"), ("ul", context_lines(rep)), ("p", DEFINITIONS)]
    for case in rep.cases:
        rows = rep.steps.get(case, [])
        if rows:
            d += [("h2", case), ("table", STEP_HEADER, [step_cells(rep, r) for r in rows], step_class)]
    if rep.steps:
        d += [("h2", "Engine tax per policy"), ("table", TAX_HEADER, tax_rows(rep), tax_class), ("p", TAX_NOTE)]
    fr = full_recompute_rows(rep)
    if fr:
        d += [("h2", "Full recomputation vs the 33% theory"), ("table", FULL_HEADER, fr, None),
              ("p", "The textbook 33% assumes a backward costs twice a forward and time follows FLOPs; the FLOP column "
                    "is this model's own ratio, *time in recomputed ops* what recomputing its blocks took, in "
                    "reference steps.")]
        kinds = recompute_kind_rows(rep)
        if kinds:
            d += [("h3", "Where full recomputation's time goes, per op kind"), ("table", KIND_HEADER, kinds, None),
                  ("p", "A time ÷ FLOP share above 1 means the op kind costs more time per FLOP than the step's "
                        "average, so recomputing it costs more than its FLOPs predict.")]
    if rep.planner:
        header, rows = planner_rows(rep)
        d += [("h2", "Planner scaling"),
              ("p", "Homogeneous chains, planner only. Each cell: peak activation / forward evaluations / planner run "
                    "time (schedule + plan)."),
              ("table", header, rows, None)]
    if rep.frameworks:
        d += [("h2", "Side by side with other frameworks"),
              ("p", "The same case and segmenting, timed in the same run on this machine: the framework's own plain "
                    "and checkpointed steps (through its adapter), and ckptcheck's store-all reference and "
                    "`uniform:k=K` engine. Step times are the fastest of 3 rounds of each run's median step. "
                    "*bitwise* says whether the framework's checkpointed run equalled its plain one."),
              ("table", FRAMEWORK_HEADER, framework_rows(rep), None)]
    if rep.user_models:
        d += [("h2", "Your own models: plain vs checkpointed"), ("p", user_models.NOTE),
              ("table", user_models.HEADER, user_models.cells(rep.user_models, fmt_bytes), None)]
    d.append(("h2", "Figures"))
    for name, title, caption, svg in figs:
        d.append(("figure", name, title, caption, svg))
    fl = findings_lines(rep)
    if fl:
        d += [("h2", "Findings"), ("ul", fl)]
    if rep.bench.errors:
        d += [("h2", "Benchmarks that reported an error"), ("ul", [f"{n}: {m}" for n, m in rep.bench.errors])]
    return d


def render_markdown(rep, figs):
    md = []
    for block in document(rep, figs):
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
            _, name, title, caption, _ = block
            md += [f"### {title}", "", f"![{title}]({name}.svg)", "", caption, ""]
    return "\n".join(md)


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


def step_class(column, c):
    if column == "bitwise":
        return "bad" if "DIFFERS" in c or "≠" in c else ("good" if c == "equal" else "")
    if column in ("engine tax", "rest"):
        try:
            return "bad" if float(c) > ENGINE_TAX_GOAL else ""
        except ValueError:
            return ""
    return ""


def tax_class(column, c):
    return "bad" if column.startswith("≤") and c == "no" else ""


def render_html(rep, figs):
    h = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
         "<title>ckptcheck overhead report</title>", f"<style>{CSS}</style></head><body>"]
    for block in document(rep, figs):
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


def terminal_table(rep):
    header = ["case", "policy", "peak", "×store-all", "fwd evals", "FLOP ovh", "time ratio", "engine tax",
              "ops", "rest", "bitwise"]
    rows = []
    for r in rep.all_rows():
        rows.append([r.case, r.display, fmt_bytes(r.peak), fmt_ratio(r.memory_ratio), str(r.forward_evals),
                     fmt_overhead(r.flop_overhead), fmt_ratio(r.time_ratio), fmt_tax(r.engine_tax),
                     opt_tax(r.op_cost_tax), opt_tax(r.rest_tax),
                     (r.verdict or "—") + ("" if r.planned_ok else " (measured≠planned)")])
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(widths[i]) if i < 2 or i == len(cells) - 1 else c.rjust(widths[i])
                         for i, c in enumerate(cells)).rstrip()

    out = [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]
    return "\n".join(out + [""] + [re.sub(r"[*`]", "", l) for l in headline(rep)])


# ---------------------------------------------------------------------------------------------------------------
# Output


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv):
    ap = argparse.ArgumentParser(description="ckptcheck overhead report")
    ap.add_argument("--bench", action="append", required=True, help="bench_engine JSON (repeatable)")
    ap.add_argument("--verify", help="ckptcheck verify --json output")
    ap.add_argument("--frameworks", action="append", default=[],
                    help="ckptcheck validate --timing-case ... --json output (repeatable)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--print-summary", action="store_true", help="print the per-case summary table")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a benchmarked step is not bitwise equal, its measurements differ from the plan, "
                         "a benchmark reported an error, or the verify JSON has a finding")
    a = ap.parse_args(argv)
    try:
        bench = Bench()
        for b in a.bench:
            bench.add_file(b)
        verify = Verify(load_json(a.verify, "verify JSON"), a.verify) if a.verify else None
        frameworks = Frameworks()
        for f in a.frameworks:
            frameworks.add(load_json(f, "frameworks JSON"), f)
        rep = Report(bench, verify, frameworks)
    except BadInput as e:
        print(f"ckptcheck report: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        figs = figures(rep)
        os.makedirs(a.out, exist_ok=True)
        for name, _, _, svg in figs:
            write_atomic(os.path.join(a.out, name + ".svg"), svg)
        write_atomic(os.path.join(a.out, "report.md"), render_markdown(rep, figs))
        write_atomic(os.path.join(a.out, "report.html"), render_html(rep, figs))
    except (OSError, RuntimeError) as e:
        print(f"ckptcheck report: {e}", file=sys.stderr)
        return EXIT_INFRA
    if a.print_summary:
        print(terminal_table(rep))
    print(f"ckptcheck report: wrote {os.path.join(a.out, 'report.md')} and {os.path.join(a.out, 'report.html')} "
          f"({len(figs)} figures)", file=sys.stderr)
    if a.check:
        failed = [f"{r.case}/{r.display}" for r in rep.all_rows()
                  if (r.verdict or "").startswith("DIFFERS") or not r.planned_ok]
        failed += [n for n, _ in bench.errors]
        if verify is not None and verify.findings:
            failed.append(f"{len(verify.findings)} verify finding(s)")
        if failed:
            print("ckptcheck report: verification failed: " + ", ".join(failed), file=sys.stderr)
            return EXIT_FINDING
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
