#!/usr/bin/env python3
"""The whole loop of planning a user's model, as CI runs it for the shipped examples (harness/engine/COSTS.md):
profile the model, report its policies, plan it at three budgets (the smallest a placement can meet, half of
store-all's peak, store-all's peak), apply each placement in PyTorch and check it with `validate --plan`.

  check_plan_loop.py --adapter torch:module=PATH.py:FACTORY --out DIR [--steps N] [--peak-finding FACTORY2]
                    -- CKPTCHECK

Each budget must give: exit 0; the checkpointed run bitwise equal to the plain one; the saved activation bytes
PyTorch used equal to the planner's prediction to the byte, and each block run as often as planned (the plan
check); the peak measured by torch.profiler within the plan check's tolerance (measured, not "not measured"); at
the smallest budget something recomputed, at store-all's nothing. With --peak-finding, FACTORY2 of the same
module (the same chain, a block that keeps a tensor past its backward) is validated with the smallest budget's
placement and must give exit 1 with a plan finding on the peak alone: saved bytes as predicted. Prints, per
budget, the policy the planner picked, predicted vs measured saved bytes, peak and step-time overhead, and writes
them to DIR/plan-loop.json for the report. Exit 0 all hold, 1 a check failed, 77 when torch is missing and
CKPT_SKIP_FRAMEWORK_TESTS=1.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_validate import fail, require_python_modules  # noqa: E402


def run(cmd, expect=0):
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != expect:
        fail("exit %d, expected %d: %s" % (r.returncode, expect, " ".join(cmd)))
    return r


def validate(exe, adapter, placement, steps, out, expect=0):
    """validate --plan, one seed; its seed record."""
    v = run(
        [exe, "validate", "--adapter", adapter, "--plan", placement, "--seeds", "1", "--steps", str(steps)]
        + ["--no-shrink", "--json", "--out", out],
        expect,
    )
    return json.loads(v.stdout)["seeds"][0]


def peak_finding(exe, a, placement):
    """--peak-finding: the leaking factory under the smallest placement: bitwise holds, saved bytes as planned,
    a plan finding on the peak."""
    adapter = a.adapter.rsplit(":", 1)[0] + ":" + a.peak_finding
    seed = validate(exe, adapter, placement, a.steps, os.path.join(a.out, "validate-peak-finding"), expect=1)
    p = seed.get("plan") or {}
    if seed["bitwise"] != "holds" or p.get("result") != "finding":
        fail("%s: expected bitwise holds and a plan finding, got %s / %s" % (adapter, seed["bitwise"], p))
    if p["predicted_saved_bytes"] != p["measured_saved_bytes"]:
        fail("%s: the saved bytes differ from the plan, the finding must be the peak's alone" % adapter)
    if not p.get("why", "").startswith("the step's peak exceeds the plan"):
        fail("%s: the finding is not the peak's: %s" % (adapter, p.get("why")))
    print(
        "peak finding as expected (%s): predicted %d, measured %d: %s"
        % (adapter, p["predicted_peak_bytes"], p["measured_peak_bytes"], p["why"])
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--peak-finding", default=None, help="a factory of the same module whose peak exceeds the plan")
    ap.add_argument("ckptcheck", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    exe = [w for w in a.ckptcheck if w != "--"]
    if len(exe) != 1:
        fail("give the ckptcheck binary after --")
    exe = exe[0]
    require_python_modules(["torch"])
    os.makedirs(a.out, exist_ok=True)
    costs = os.path.join(a.out, "costs.json")
    run([exe, "profile", "--adapter", a.adapter, "--out", costs])
    report = os.path.join(a.out, "report")
    run([exe, "report", "--costs", costs, "--out", report, "--quiet"])
    with open(os.path.join(report, "costs-plans-0.json")) as f:
        plans = json.load(f)
    full, least = plans["store_all_peak_bytes"], plans["min_placement_budget"]
    budgets = [("smallest", least), ("half", max(least, full // 2)), ("store-all", full)]
    rows = []
    for label, budget in budgets:
        placement = os.path.join(a.out, "placement-%s.json" % label)
        plan = json.loads(
            run([exe, "plan", "--costs", costs, "--budget", str(budget), "--placement", placement, "--json"]).stdout
        )
        seed = validate(exe, a.adapter, placement, a.steps, os.path.join(a.out, "validate-%s" % label))
        if seed["bitwise"] != "holds":
            fail("%s budget: bitwise %s: %s" % (label, seed["bitwise"], seed.get("first_difference")))
        p = seed.get("plan")
        if p is None:
            fail("%s budget: no plan check in the report" % label)
        if p["result"] != "holds":
            fail("%s budget: %s" % (label, p.get("why")))
        if p["predicted_saved_bytes"] != p["measured_saved_bytes"]:
            fail(
                "%s budget: predicted %d B, measured %d B"
                % (label, p["predicted_saved_bytes"], p["measured_saved_bytes"])
            )
        if p.get("measured_peak_bytes") is None:
            fail("%s budget: the peak was not measured" % label)
        recomputes = plan["forward_evals"] > plans["layers"]
        if label == "store-all" and recomputes:
            fail("at store-all's peak the planner still recomputes (%s)" % plan["policy"])
        if label == "smallest" and not recomputes:
            fail("at the smallest budget nothing is recomputed (%s)" % plan["policy"])
        rows.append(
            {
                "budget_label": label,
                "budget": budget,
                "policy": plan["policy"],
                "peak_activation_bytes": plan["peak_activation_bytes"],
                "predicted_saved_bytes": p["predicted_saved_bytes"],
                "measured_saved_bytes": p["measured_saved_bytes"],
                "predicted_peak_bytes": p["predicted_peak_bytes"],
                "measured_peak_bytes": p["measured_peak_bytes"],
                "plain_saved_bytes": seed.get("memory", {}).get("plain_bytes"),
                "predicted_time_overhead": p["predicted_time_overhead"],
                "measured_time_overhead": p["measured_time_overhead"],
                "measured_time_overhead_middle_half": p.get("measured_time_overhead_middle_half"),
            }
        )
    if a.peak_finding:
        peak_finding(exe, a, os.path.join(a.out, "placement-smallest.json"))
    print(
        "\n%-10s %12s  %-28s %14s %14s %12s %12s %7s %9s %9s"
        % (
            "budget",
            "bytes",
            "policy",
            "saved pred",
            "saved meas",
            "peak pred",
            "peak meas",
            "diff",
            "time pred",
            "time meas",
        )
    )
    for r in rows:
        pct = lambda v: "n/a" if v is None else "%+.1f%%" % (100 * v)  # noqa: E731
        print(
            "%-10s %12d  %-28s %14d %14d %12d %12d %7s %9s %9s"
            % (
                r["budget_label"],
                r["budget"],
                r["policy"],
                r["predicted_saved_bytes"],
                r["measured_saved_bytes"],
                r["predicted_peak_bytes"],
                r["measured_peak_bytes"],
                pct(r["measured_peak_bytes"] / r["predicted_peak_bytes"] - 1),
                pct(r["predicted_time_overhead"]),
                pct(r["measured_time_overhead"]),
            )
        )
    tmp = os.path.join(a.out, ".plan-loop.json.tmp")
    with open(tmp, "w") as f:
        json.dump({"format": "ckptcheck-plan-loop", "version": 1, "adapter": a.adapter, "rows": rows}, f, indent=1)
    os.replace(tmp, os.path.join(a.out, "plan-loop.json"))
    print("plan loop holds: %d budgets" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
