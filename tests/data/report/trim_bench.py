#!/usr/bin/env python3
"""Trims a bench_engine JSON to what the report reads, one benchmark a line, for the fixtures beside this file
(bench_catalogue_small.json, bench_catalogue_rerun.json): BM_Step's repetitions with the counters the report and
the baseline comparison use, and the q1/q3 aggregates; the context's policy families and run description.

    trim_bench.py IN.json OUT.json
"""

import json
import sys

KEEP = (
    "name",
    "run_type",
    "aggregate_name",
    "label",
    "layers",
    "micro_batches",
    "peak_activation_bytes",
    "store_all_peak_activation_bytes",
    "forward_evals",
    "flops_forward",
    "flops_recompute",
    "flops_backward",
    "flop_overhead",
    "time_overhead",
    "step_seconds",
    "store_all_step_seconds",
    "planned_equals_measured",
    "bitwise_equal",
    "predicted_time_overhead",
    "time_model_recompute_share",
    "time_model_tape_weight",
    "time_model_advance_weight",
    "time_model_rebuild_weight",
    "time_model_calibration_residual",
    "time_model_calibration_passes",
    "time_model_calibration_row",
    "recompute_time_share",
    "error_occurred",
    "error_message",
)
CONTEXT = (
    "date",
    "num_cpus",
    "load_avg",
    "build_type",
    "ckpt_mode",
    "ckptcheck_version",
    "compiler",
    "cpu",
    "git_commit",
)


def main(src, dst):
    doc = json.load(open(src, encoding="utf-8"))
    ctx = {k: v for k, v in doc["context"].items() if k in CONTEXT or k.startswith("policy_family:")}
    keep = [
        {k: b[k] for k in KEEP if k in b}
        for b in doc["benchmarks"]
        if b.get("run_type") == "iteration" or b.get("aggregate_name") in ("q1", "q3")
    ]
    with open(dst, "w", encoding="utf-8") as f:
        f.write('{"context": ' + json.dumps(ctx, sort_keys=True) + ',\n "benchmarks": [\n')
        f.write(",\n".join("  " + json.dumps(b) for b in keep))
        f.write("\n]}\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
