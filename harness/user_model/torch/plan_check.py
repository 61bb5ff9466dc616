"""The prediction of a placement's saved bytes from a costs file (harness/engine/COSTS.md, "Saved bytes of a
placement"), as code: what user_model.py --plan measures in step 0 must equal it.

  predict_saved(costs, segments) -> {"total", "before", "after", "by_block"}

The bytes the checkpointed run packs in forward are the union, each storage once, of: the outside parts' own
saves (and x_0 / x_L when they save them, and the shared storages they save); per stored block its ops'
saved_bytes, x_i when it saves_input, x_{i+1} when it saves_output and the shared storages it saves; per
recomputed segment its input x_first and every shared `argument` storage (the checkpoint keeps its tensor
arguments). Each storage is charged to the first party claiming it in forward order: before, block 0, ..,
block L-1, after. Within a stored block the order of its claims does not matter (one party).
"""


def predict_saved(costs, segments):
    blocks = costs["blocks"]
    n = len(blocks)
    bounds = costs["boundary_bytes"]
    shared = costs["shared"]
    seen = set()  # ("x", k) for boundary k, ("s", j) for shared j

    def once(key, nbytes):
        if key in seen:
            return 0
        seen.add(key)
        return nbytes

    def shared_where(pred):
        return sum(once(("s", j), s["bytes"]) for j, s in enumerate(shared) if pred(s))

    before = costs["outside"]["before"]
    total_before = before["saved_bytes"]
    if before["saves_chain_input"]:
        total_before += once(("x", 0), bounds[0])
    total_before += shared_where(lambda s: s["before"])

    by_block = [0] * n
    covered = 0
    for g in segments:
        first, last = g["first"], g["last"]
        if first != covered or last < first or last >= n:
            raise ValueError("segments must cover blocks 0..%d in order" % (n - 1))
        covered = last + 1
        if g["recompute"]:
            by_block[first] += once(("x", first), bounds[first])
            by_block[first] += shared_where(lambda s: s["argument"])
            continue
        for i in range(first, last + 1):
            b = blocks[i]
            got = sum(op["saved_bytes"] for op in b["ops"])
            if b["saves_input"]:
                got += once(("x", i), bounds[i])
            if b["saves_output"]:
                got += once(("x", i + 1), bounds[i + 1])
            got += shared_where(lambda s, i=i: i in s["saved_by"])
            by_block[i] += got
    if covered != n:
        raise ValueError("segments cover blocks 0..%d, the chain has %d" % (covered - 1, n))

    after = costs["outside"]["after"]
    total_after = after["saved_bytes"]
    if after["saves_chain_output"]:
        total_after += once(("x", n), bounds[n])
    total_after += shared_where(lambda s: s["after"])
    return {
        "total": total_before + sum(by_block) + total_after,
        "before": total_before,
        "after": total_after,
        "by_block": by_block,
    }


def forward_calls(segments):
    """1 for a stored block, 2 for a recomputed one (forward, then once more in backward)."""
    calls = []
    for g in segments:
        calls += [2 if g["recompute"] else 1] * (g["last"] - g["first"] + 1)
    return calls


def recompute_seconds(costs, i, next_stored):
    """What recomputing block i adds to the step (COSTS.md): its measured recompute_end_seconds where the next
    block is stored (`next_stored`; the part after the chain always is) and the file has them, its
    recompute_seconds otherwise; in older files its forward seconds plus checkpoint_seconds. A prediction counts
    it at 0 or more."""
    b = costs["blocks"][i]
    if next_stored and "recompute_end_seconds" in b:
        return b["recompute_end_seconds"]
    if "recompute_seconds" in b:
        return b["recompute_seconds"]
    return b["forward_seconds"] + costs.get("checkpoint_seconds", 0.0)


def placement(costs, segments, policy="hand"):
    """A placement.json object (COSTS.md) for hand-made `segments` of the profiled model (the self-test's and
    by-hand checks'), with its prediction. Not the planner: peak_activation_bytes is not planned here, the saved
    total stands in for it; flop_overhead is the recomputed blocks' forward FLOPs over the step's FLOPs."""
    p = predict_saved(costs, segments)
    recomputed = [i for g in segments if g["recompute"] for i in range(g["first"], g["last"] + 1)]
    fwd = sum(costs["blocks"][i]["forward_flops"] for i in recomputed)
    total_flops = sum(b["forward_flops"] + b["backward_flops"] for b in costs["blocks"]) + sum(
        part["forward_flops"] + part["backward_flops"] for part in costs["outside"].values()
    )
    secs = sum(max(0.0, recompute_seconds(costs, i, i + 1 not in recomputed)) for i in recomputed)
    return {
        "format": "ckptcheck-placement",
        "version": 1,
        "model": costs["model"],
        "policy": policy,
        "batch_size": costs["batch_size"],
        "blocks": [b["name"] for b in costs["blocks"]],
        "segments": [dict(g) for g in segments],
        "predicted": {
            "saved_bytes": p["total"],
            "saved_bytes_before": p["before"],
            "saved_bytes_after": p["after"],
            "saved_bytes_by_block": p["by_block"],
            "forward_calls": forward_calls(segments),
            "peak_activation_bytes": p["total"],
            "flop_overhead": fwd / total_flops if total_flops else 0.0,
            "time_overhead": secs / costs["step_seconds"] if costs["step_seconds"] > 0 else 0.0,
        },
    }
