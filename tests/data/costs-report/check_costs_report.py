#!/usr/bin/env python3
"""The report's "Profiled model" section (reports/make_report.py --costs-plans, reports/costs_report.py) on the
fixed plans file beside this script, gpt2_plans.json (hand-written: what `ckptcheck report --costs costs.json
--budget 20971520` writes for a 6-block GPT-2-like model): made from the costs alone (no --bench), the section,
its table rows with the file's numbers, the cheapest-under-the-budget and smallest-feasible-budget line, the
summary line and the figure are there; a second run writes the same bytes; without a budget the report says so
(and a policy with no predicted time shows "—"); next to a bench JSON both parts are there; a bad file
(bad_negative.json, and a version 2 one made here) exits 2 with one line naming the file and the field, and
writes nothing.

    check_costs_report.py [PYTHON]

PYTHON runs make_report.py (it needs matplotlib): the argument, else $CKPT_REPORT_PYTHON, else /usr/bin/python3
as `ckptcheck report` picks, else this interpreter. Exit 0 when every check holds, 1 otherwise (each failed
check printed).
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from check_harness import Checks  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PLANS = os.path.join(HERE, "gpt2_plans.json")
BAD = os.path.join(HERE, "bad_negative.json")
BENCH = os.path.join(SOURCE, "tests", "data", "report", "bench_small.json")
MODEL = "torch:module=examples/torch/gpt2.py:plan"
FIGURE = "fig-costs-gpt2-py-plan.svg"

check = Checks("check_costs_report")


def python():
    if len(sys.argv) > 1:
        return sys.argv[1]
    env = os.environ.get("CKPT_REPORT_PYTHON")
    if env:
        return env
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def report(args, out):
    r = subprocess.run(
        [python(), "-m", "reports.make_report"] + args + ["--out", out],
        capture_output=True,
        text=True,
        cwd=HERE,
        env=dict(os.environ, PYTHONPATH=SOURCE),
    )
    return r.returncode, r.stdout, r.stderr


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def section(md, heading):
    """The text of the "## heading" section, up to the next "## " heading."""
    at = md.find("\n## " + heading + "\n")
    if at < 0:
        return ""
    end = md.find("\n## ", at + 1)
    return md[at:] if end < 0 else md[at:end]


def main():
    return check.run("ckpt_costs_report_", run)


def run(tmp):
    a = os.path.join(tmp, "a")
    rc, out, err = report(["--costs-plans", PLANS, "--print-summary"], a)
    if not check(rc == 0, f"costs-only report: exit {rc}, stderr: {err}"):
        return
    for f in ("report.md", "report.html", FIGURE):
        check(os.path.isfile(os.path.join(a, f)), f"costs-only report: {f} not written")
    md, html = read(os.path.join(a, "report.md")), read(os.path.join(a, "report.html"))
    svg = read(os.path.join(a, FIGURE))

    # The section, its table and its figure.
    sec = section(md, "Profiled model: " + MODEL)
    check(sec, f"no '## Profiled model: {MODEL}' section:\n{md}")
    check(
        "| policy | peak activation (planned) | bytes | × store-all | forward evals | FLOP overhead | predicted time "
        "overhead | frontier | per-module placement | predicted saved bytes |" in sec,
        "policy table header",
    )
    # gpt2_plans.json: store-all peaks at 46399488 bytes (44.2 MiB), no recompute, saves 46399488; recursive at
    # 16515072 (0.356 of store-all) with 14 forward evaluations, FLOP overhead 0.39187, predicted time 0.40325,
    # above optimal's 0.2449 at that budget (off), not a per-module placement; segments:budget=20971520 is the
    # file's cheapest under the budget of 20971520.
    for row in (
        "| store-all | 44.2 MiB | 46399488 | 1.000 | 6 | 0.0000 | 0.0000 | on | yes | 44.2 MiB (46399488) |",
        "| recursive | 15.8 MiB | 16515072 | 0.356 | 14 | 0.3919 | 0.4033 | off | no: recomputes blocks from "
        "recomputed boundaries (nested checkpoints) | — |",
        "| segments:budget=20971520 (cheapest under the budget) | 15.8 MiB | 16515072 | 0.356 | 11 | 0.2449 | "
        "0.2520 | on | yes | 15.8 MiB (16515072) |",
        "| selective | 32.2 MiB | 33816576 | 0.729 | 6 | 0.0210 | 0.0650 | on | no: op-level masks (selective "
        "activation checkpointing), not per-module | — |",
    ):
        check("\n" + row + "\n" in sec, f"table row missing: {row}")
    plans = json.load(open(PLANS, encoding="utf-8"))
    rows = [line for line in sec.splitlines() if line.startswith("| ") and not line.startswith("| policy |")]
    check(len(rows) == len(plans["policies"]), f"{len(rows)} table rows for {len(plans['policies'])} policies")
    for p, row in zip(plans["policies"], rows, strict=False):
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        check(
            cells[0].split(" (")[0] == p["policy"]
            and cells[2] == str(p["peak_activation_bytes"])
            and cells[4] == str(p["forward_evals"])
            and cells[5] == f"{p['flop_overhead']:.4f}"
            and cells[6] == f"{p['time_overhead']:.4f}"
            and cells[8].startswith("yes" if p["expressible"] else "no")
            and (cells[9] == "—" if p["saved_bytes"] is None else cells[9].endswith(f"({p['saved_bytes']})")),
            f"row of {p['policy']} does not carry the file's numbers: {row}",
        )
    check(
        "Smallest feasible budget: 14.2 MiB (14942208 bytes, 32.2% of store-all). Cheapest policy under the budget "
        "of 20.0 MiB (20971520 bytes): **segments:budget=20971520**, planned peak 15.8 MiB (16515072 bytes), FLOP "
        "overhead 0.2449, predicted time overhead 0.2520." in sec,
        "cheapest / smallest feasible budget line",
    )
    check("Predicted, not measured" in sec and "**predicted**" in sec, "the section does not say it is predicted")
    check(f"![Predicted memory vs recompute: gpt2.py:plan]({FIGURE})" in sec, "the figure is not linked")
    check(svg.startswith("<?xml") and "<svg" in svg and "<dc:date>" not in svg, "the figure is not a dateless SVG")
    for text in (
        "optimal frontier",
        "budget 20.0 MiB",
        "cheapest under the budget: segments:budget=20971520",
        "FLOP overhead (predicted)",
        "Time overhead (predicted)",
        "recursive (not per-module)",
    ):
        check(text in svg, f"the figure lacks '{text}'")

    # The summary names the profiled model; a costs-only report has no bench sections.
    summary = section(md, "Where the time goes")
    check(
        f"- Profiled model **{MODEL}** (torch 2.15.0, batch 4, 6 blocks; predicted from its chain costs, not "
        "measured): store-all peak 44.2 MiB, smallest feasible budget 14.2 MiB (32.2% of it); cheapest under "
        "20.0 MiB: segments:budget=20971520 (FLOP overhead 0.2449, predicted time overhead 0.2520); 6 of 10 "
        "policies can be applied as a per-module placement." in summary,
        f"summary line:\n{summary}",
    )
    # The first screen's table: uniform:k=3 peaks at 22282240 of 46399488 bytes (saves 52%) for a predicted 0.2016
    # (+20%), the cheapest per-module placement within half the memory.
    check(
        "| gpt2.py:plan<br>6 blocks, predicted | 44.2 MiB<br>12.30 ms | uniform:k=3<br>52% saved, +20% time |" in md,
        f"first-screen row of the model:\n{md[:3000]}",
    )
    for h in ("## Run", "## Figures", "## Engine tax per policy"):
        check("\n" + h + "\n" not in md, f"a costs-only report has '{h}'")
    check(
        f"Profiled model {MODEL} (predicted): Smallest feasible budget: 14.2 MiB" in out
        and "Cheapest policy under the budget of 20.0 MiB (20971520 bytes): segments:budget=20971520," in out,
        f"--print-summary: {out}",
    )

    # The HTML: self-contained, the figure embedded once.
    check("http" not in html and "<script" not in html and "<link" not in html, "the HTML is not self-contained")
    check(
        html.count('src="data:image/svg+xml;base64,') == 2, "the HTML does not embed the summary and the model's figure"
    )
    check(f"<h2>Profiled model: {MODEL}</h2>" in html and "<td>16515072</td>" in html, "the HTML lacks the section")

    # Deterministic: the same input, the same bytes.
    b = os.path.join(tmp, "b")
    rc2, out2, _ = report(["--costs-plans", PLANS, "--print-summary"], b)
    check(rc2 == 0 and out2 == out, "second run: exit or summary differs")
    check(sorted(os.listdir(a)) == sorted(os.listdir(b)), "second run wrote other files")
    for f in os.listdir(a):
        if os.path.isfile(os.path.join(b, f)):
            check(read(os.path.join(a, f)) == read(os.path.join(b, f)), f"second run: {f} differs")

    # Without a budget: no cheapest, the report says so. A policy without a predicted time (null) shows "—".
    nobudget = json.loads(json.dumps(plans))
    nobudget.update(budget=None, cheapest=None)
    nobudget["policies"][8]["time_overhead"] = None  # selective
    nb_path = os.path.join(tmp, "nobudget.json")
    with open(nb_path, "w", encoding="utf-8") as f:
        json.dump(nobudget, f)
    rc, _, err = report(["--costs-plans", nb_path], os.path.join(tmp, "nb"))
    if check(rc == 0, f"no-budget report: exit {rc}, {err}"):
        nmd = read(os.path.join(tmp, "nb", "report.md"))
        check("No budget given" in nmd and "(cheapest under the budget)" not in nmd, "no-budget report's text")
        check(
            "\n| selective | 32.2 MiB | 33816576 | 0.729 | 6 | 0.0210 | — | on |" in nmd,
            "a null time_overhead is not shown as —",
        )
        check("budget 20.0 MiB" not in read(os.path.join(tmp, "nb", FIGURE)), "no-budget figure draws a budget")

    # Next to a bench JSON: the catalogue report and the profiled model, every figure.
    rc, _, err = report(["--bench", BENCH, "--costs-plans", PLANS], os.path.join(tmp, "mixed"))
    if check(rc == 0, f"bench + costs report: exit {rc}, {err}"):
        mmd = read(os.path.join(tmp, "mixed", "report.md"))
        check(
            "\n<details><summary><b>tiny</b>: 8 policies</summary>\n" in mmd
            and f"\n## Profiled model: {MODEL}\n" in mmd
            and "\n## Run\n" in mmd,
            "bench + costs report lacks a part",
        )
        for f in ("fig-summary.svg", "fig-memory-vs-layers.svg", "fig-frontier.svg", "fig-overhead.svg", FIGURE):
            check(os.path.isfile(os.path.join(tmp, "mixed", f)), f"bench + costs report: {f} not written")
        check(
            read(os.path.join(tmp, "mixed", "report.html")).count('src="data:image/svg+xml;base64,') == 5,
            "bench + costs HTML does not embed 5 figures",
        )

    # Bad input: exit 2, one line naming the file and the field, nothing written.
    v2 = dict(plans, version=2)
    v2_path = os.path.join(tmp, "version2.json")
    with open(v2_path, "w", encoding="utf-8") as f:
        json.dump(v2, f)
    for path, field in (
        (BAD, "policies[0].flop_overhead: must be a non-negative number"),
        (v2_path, "version: must be 1, not 2"),
    ):
        o = os.path.join(tmp, "bad-" + os.path.basename(path))
        rc, _, err = report(["--costs-plans", path], o)
        check(rc == 2, f"{os.path.basename(path)}: exit {rc}, not 2")
        check(err.count("\n") == 1 and path in err and field in err, f"{os.path.basename(path)}: stderr {err!r}")
        check(not os.path.exists(os.path.join(o, "report.md")), f"{os.path.basename(path)}: a report was written")


if __name__ == "__main__":
    sys.exit(main())
