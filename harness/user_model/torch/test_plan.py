#!/usr/bin/env python3
"""Self-test of the profile / placement path of the torch adapter (harness/engine/COSTS.md), on a tiny model
built here: a chain of four blocks (Linear, BatchNorm1d, ReLU, Dropout, times a gate every block takes as a
further argument). Run as a plain script: exit 0 when every check holds, 1 otherwise (one line per failure).

  - chain_profile.py writes costs whose byte counts add up (it checks that itself), name the gate as a
    shared argument and hold each block's recompute_seconds and recompute_end_seconds (finite numbers, negative
    where recomputing a block costs less than it saves; no timing is judged);
  - for three placements (all stored; [0,1] and [2] recomputed, [3] stored; every block its own recomputed
    segment but the last), user_model.py --plan trains bitwise as the plain run (every dumped tensor), saves
    what plan_check.predict_saved predicts (total, before, after, per block) and calls each block 1 or 2 times;
  - without the buffer guard the recompute moves BatchNorm's statistics twice (the check sees it);
  - the same with blocks that return a tuple and take the gate by keyword (HF style);
  - a chain out of order is refused (exit 2, "profile: chain is not sequential: ..."), and so is a placement
    naming a block the model does not have;
  - the side-by-side timing's plain twin, given the placed model's state, steps bitwise as the model does, and the
    garbage collector is back as it was after the timed steps; the timing stops where timed_enough says.
Everything runs in this process (the factories below are loaded from this file, as a user's would be).
"""

import contextlib
import copy
import gc
import io
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
import weakref

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

WIDTH, BLOCKS = 8, 4


class Block(torch.nn.Module):
    def __init__(self, as_tuple):
        super().__init__()
        self.lin = torch.nn.Linear(WIDTH, WIDTH)
        self.bn = torch.nn.BatchNorm1d(WIDTH)
        self.drop = torch.nn.Dropout(0.2)
        self.as_tuple = as_tuple

    def forward(self, x, gate, scale=1.0):
        h = self.drop(torch.relu(self.bn(self.lin(x)))) * gate * scale
        return (h, None) if self.as_tuple else h


class Tiny(torch.nn.Module):
    """as_tuple: the blocks return (h, None), take the gate as a keyword and a float by keyword (HF style)."""

    def __init__(self, as_tuple=False):
        super().__init__()
        self.stem = torch.nn.Linear(4, WIDTH)
        self.gate = torch.nn.Linear(4, WIDTH)
        self.blocks = torch.nn.ModuleList(Block(as_tuple) for _ in range(BLOCKS))
        self.head = torch.nn.Linear(WIDTH, 3)
        self.as_tuple = as_tuple

    def forward(self, x):
        gate = self.gate(x)  # saved by every block, not by the stem: the checkpoint of a segment keeps it
        h = self.stem(x)
        for b in self.blocks:
            h = b(h, gate=gate, scale=0.5)[0] if self.as_tuple else b(h, gate)
        return self.head(h)


def _setup(chain, as_tuple=False):
    return {
        "model": Tiny(as_tuple),
        "batch": lambda gen, n: (torch.randn(n, 4, generator=gen), torch.randint(0, 3, (n,), generator=gen)),
        "loss": lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
        "optimizer": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        "checkpoint": lambda m: None,
        "chain": chain,
        "batch_size": 6,
    }


def tiny(seed):
    return _setup(lambda m: m.blocks)


def tiny_tuple(seed):
    return _setup(lambda m: m.blocks, as_tuple=True)


def reversed_chain(seed):
    return _setup(lambda m: list(m.blocks)[::-1])


FAILURES = []


def check(cond, text):
    if not cond:
        FAILURES.append(text)
        print("FAIL: " + text)


def quiet(fn, argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = fn(argv)
    return code, err.getvalue()


def dumps_equal(a, b):
    ta = json.load(open(os.path.join(a, "index.json")))["tensors"]
    tb = json.load(open(os.path.join(b, "index.json")))["tensors"]
    if [(t["step"], t["kind"], t["name"]) for t in ta] != [(t["step"], t["kind"], t["name"]) for t in tb]:
        return "the dumps list other tensors"
    for x, y in zip(ta, tb, strict=False):
        if (x["file"] is None) != (y["file"] is None):
            return "%s %s: absent in one run" % (x["kind"], x["name"])
        if x["file"] is None:
            continue
        u, v = np.load(os.path.join(a, x["file"])), np.load(os.path.join(b, y["file"]))
        if u.dtype != v.dtype or u.shape != v.shape or u.tobytes() != v.tobytes():
            return "step %d %s %s differs" % (x["step"], x["kind"], x["name"])
    return None


def _adapter():
    """The adapter's modules (imported here, not at the top: user_model.py loads this file as a factory)."""
    import apply_plan
    import chain_profile
    import plan_check
    import user_model

    return apply_plan, chain_profile, plan_check, user_model


def check_placements(work, factory):
    """Profile `factory`, then the three placements against the plain run, then the unguarded recompute."""
    apply_plan, chain_profile, plan_check, user_model = _adapter()
    os.makedirs(work)
    me = os.path.abspath(__file__)
    costs_path = os.path.join(work, "costs.json")
    code, err = quiet(chain_profile.main, ["--module", me, "--factory", factory, "--out", costs_path])
    check(code == 0, "%s: profile exit %d: %s" % (factory, code, err.strip()))
    if code:
        return
    costs = json.load(open(costs_path))
    check([b["name"] for b in costs["blocks"]] == ["blocks.%d" % i for i in range(BLOCKS)], "block names")
    check(len(costs["boundary_bytes"]) == BLOCKS + 1, "boundary_bytes: L+1 sizes")
    recompute = [b.get(k) for b in costs["blocks"] for k in ("recompute_seconds", "recompute_end_seconds")]
    check(
        all(isinstance(r, float) and math.isfinite(r) for r in recompute) and "checkpoint_seconds" not in costs,
        "%s: recompute_seconds and recompute_end_seconds, what recomputing each block adds to the step, measured "
        "per block with its successor recomputed and stored (and no checkpoint_seconds beside them): %r"
        % (factory, recompute),
    )
    gate = [s for s in costs["shared"] if s["argument"]]
    check(
        len(gate) == 1 and gate[0]["saved_by"] == list(range(BLOCKS)) and not gate[0]["before"],
        "%s: the gate is a shared argument saved by every block: %s" % (factory, costs["shared"]),
    )
    for b in costs["blocks"]:
        check(
            b["forward_flops"] == sum(o["forward_flops"] for o in b["ops"]) and b["forward_flops"] > 0,
            "%s: forward FLOPs are the ops' sum" % b["name"],
        )
        check(any(o["matmul"] and o["backward_flops"] > 0 for o in b["ops"]), "%s: a matmul op" % b["name"])

    # The saved-bytes pass (instruments.py): the one that records what a placement saves and runs.
    common = ["--module", me, "--factory", factory, "--seed", "1", "--steps", "2", "--instruments", "saved"]
    plain_dir = os.path.join(work, "plain")
    code, err = quiet(user_model.main, common + ["--mode", "plain", "--out", plain_dir])
    check(code == 0, "%s: plain run exit %d" % (factory, code))
    plain_saved = json.load(open(os.path.join(plain_dir, "index.json")))["saved_activation_bytes"]
    R, S = True, False
    placements = {
        "stored": [(0, 3, S)],
        "uniform": [(0, 1, R), (2, 2, R), (3, 3, S)],
        "stored-first": [(0, 0, S), (1, 3, R)],
        "each": [(0, 0, R), (1, 1, R), (2, 2, R), (3, 3, S)],
    }
    for name, segs in placements.items():
        what = "%s %s" % (factory, name)
        segments = [{"first": f, "last": last, "recompute": r} for f, last, r in segs]
        pf = os.path.join(work, name + ".placement.json")
        with open(pf, "w") as f:
            json.dump(plan_check.placement(costs, segments, policy=name), f)
        out = os.path.join(work, name)
        code, err = quiet(user_model.main, common + ["--mode", "checkpoint", "--plan", pf, "--out", out])
        check(code == 0, "%s: checkpoint run exit %d %s" % (what, code, err.strip()[-300:]))
        if code:
            continue
        diff = dumps_equal(plain_dir, out)
        check(diff is None, "%s: not bitwise equal to plain: %s" % (what, diff))
        measured = json.load(open(os.path.join(out, "index.json")))["plan"]
        want = plan_check.predict_saved(costs, segments)
        got = {
            "total": measured["saved_bytes"],
            "before": measured["saved_bytes_before"],
            "after": measured["saved_bytes_after"],
            "by_block": measured["saved_bytes_by_block"],
        }
        check(got == want, "%s: saved bytes measured %s, predicted %s" % (what, got, want))
        check(
            measured["forward_calls"] == plan_check.forward_calls(segments),
            "%s: forward calls %s" % (what, measured["forward_calls"]),
        )
        if name == "stored":
            check(want["total"] == plain_saved, "%s: predicts %d, plain saves %d" % (what, want["total"], plain_saved))
        else:
            check(want["total"] < plain_saved, "%s: saves no less than plain" % what)

    # Without the buffer guard the recompute moves the running statistics a second time.
    guard_exit = apply_plan.KeepBuffers.__exit__
    apply_plan.KeepBuffers.__exit__ = lambda self, *exc: False
    try:
        out = os.path.join(work, "unguarded")
        quiet(
            user_model.main,
            common + ["--mode", "checkpoint", "--plan", os.path.join(work, "each.placement.json"), "--out", out],
        )
        diff = dumps_equal(plain_dir, out)
        check(
            diff is not None and "running_" in diff,
            "%s unguarded recompute: expected a buffer difference, got %s" % (factory, diff),
        )
    finally:
        apply_plan.KeepBuffers.__exit__ = guard_exit


def check_rejections(work):
    _, chain_profile, _, user_model = _adapter()
    me = os.path.abspath(__file__)
    code, err = quiet(
        chain_profile.main, ["--module", me, "--factory", "reversed_chain", "--out", os.path.join(work, "rev.json")]
    )
    lines = err.strip().splitlines()
    check(
        code == 2 and len(lines) == 1 and lines[0].startswith("profile: chain is not sequential: block"),
        "reversed chain: exit %d, %r" % (code, err),
    )
    with open(os.path.join(work, "tiny", "each.placement.json")) as f:
        bad = json.load(f)
    bad["blocks"][2] = "blocks.9"
    pf = os.path.join(work, "bad.placement.json")
    with open(pf, "w") as f:
        json.dump(bad, f)
    out = os.path.join(work, "bad")
    code, _ = quiet(
        user_model.main,
        [
            "--module",
            me,
            "--factory",
            "tiny",
            "--seed",
            "1",
            "--steps",
            "1",
            "--mode",
            "checkpoint",
            "--plan",
            pf,
            "--out",
            out,
        ],
    )
    error = json.load(open(os.path.join(out, "index.json"))).get("error") or {}
    check(
        code == 2 and error.get("kind") == "bad_factory" and "blocks.9" in error.get("message", ""),
        "a placement naming a missing block: exit %d, %s" % (code, error),
    )


def _train(setup, model, opt, step):
    torch.manual_seed(step)  # the same dropout masks in both models
    batch = setup["batch"](torch.Generator().manual_seed(step), setup["batch_size"])
    opt.zero_grad(set_to_none=True)
    setup["loss"](model, batch).backward()
    opt.step()


class _Node:
    pass


def check_timing_state():
    """The side-by-side timing's twin: given the placed model's state (user_model.give_state) after the model
    trained alone, one more step of each ends bitwise alike; without it they differ (the check can fail). The
    twin's optimizer state is its own copy. collector_between_steps turns the collector off and back as it was, and
    its settle() frees a cycle made since the last."""
    apply_plan, _, _, user_model = _adapter()
    for give in (True, False):
        setup = tiny(0)
        model = setup["model"]
        twin = copy.deepcopy(model)
        twin_opt = setup["optimizer"](twin.parameters())
        pairs = user_model.twin_pairs(model, twin)
        names = ["blocks.%d" % i for i in range(BLOCKS)]
        apply_plan.apply(
            model,
            list(model.blocks),
            {
                "blocks": names,
                "segments": [{"first": 0, "last": 1, "recompute": True}, {"first": 2, "last": 3, "recompute": False}],
            },
        )
        opt = setup["optimizer"](model.parameters())
        for step in range(2):
            _train(setup, model, opt, step)
        if give:
            user_model.give_state(pairs, opt, twin_opt)
            mine, theirs = (
                next(iter(opt.state.values()))["momentum_buffer"],
                twin_opt.state[pairs[0][1]]["momentum_buffer"],
            )
            check(mine.data_ptr() != theirs.data_ptr(), "give_state: the twin's momentum is the model's own tensor")
        _train(setup, model, opt, 2)
        _train(setup, twin, twin_opt, 2)
        same = all(torch.equal(a, b) for a, b in pairs)
        check(
            same == give,
            "give_state %s: the next step's parameters and buffers are %s"
            % ("given" if give else "not given", "equal" if same else "not equal"),
        )
    for before in (True, False):
        (gc.enable if before else gc.disable)()
        with user_model.collector_between_steps() as settle:
            check(not gc.isenabled(), "collector_between_steps: the collector runs inside")
            node = _Node()
            node.me, gone = node, weakref.ref(node)  # a cycle only the collector frees
            del node
            settle()
            check(gone() is None, "collector_between_steps: settle() left a step's cycle alive")
        check(gc.isenabled() == before, "collector_between_steps: the collector is not as it was (%s)" % before)
    gc.enable()


def check_timing_stop():
    """The side-by-side timing stops where timed_enough says: not before --timing-pairs, at once where every pair
    agrees, at the cap where the pairs spread too widely to pin the median to TIMING_PRECISION; the standard error
    is a normal sample's; side_by_side itself times as many pairs as timed_enough asked for, each side alike."""
    _, _, _, user_model = _adapter()
    cap = user_model.TIMING_MAX_FACTOR * 48

    def pairs(ratios):
        return {"plain": [0.01] * len(ratios), "checkpoint": [0.01 * (1.0 + r) for r in ratios]}  # 10 ms steps

    check(not user_model.timed_enough(pairs([0.2] * 47), 48, 0.0), "timed_enough: stopped before --timing-pairs")
    check(user_model.timed_enough(pairs([0.2] * 48), 48, 0.0), "timed_enough: pairs that agree did not stop at 48")
    wide = [0.0, 0.5] * (cap // 2)
    check(not user_model.timed_enough(pairs(wide[: cap - 2]), 48, 0.0), "timed_enough: a wide spread stopped early")
    check(user_model.timed_enough(pairs(wide), 48, 0.0), "timed_enough: no stop at %d pairs" % cap)
    # The wall-time cap: whatever the steps' own times, once the timing has run TIMING_MAX_SECONDS (the collections
    # between steps included), but never before --timing-pairs.
    late = user_model.TIMING_MAX_SECONDS
    check(not user_model.timed_enough(pairs(wide[:48]), 48, late - 1), "timed_enough: stopped before the wall cap")
    check(user_model.timed_enough(pairs(wide[:48]), 48, late), "timed_enough: no stop at TIMING_MAX_SECONDS of wall")
    check(not user_model.timed_enough(pairs(wide[:47]), 48, 10 * late), "timed_enough: the wall cap cut --timing-pairs")
    gen = random.Random(43)
    sample = [gen.gauss(0.2, 0.1) for _ in range(4000)]
    se = user_model.median_standard_error(sample)
    want = 1.2533 * 0.1 / math.sqrt(len(sample))
    check(abs(se / want - 1) < 0.1, "median_standard_error: %g, a normal sample's is %g" % (se, want))
    setup = tiny(0)
    model = setup["model"]
    twin = copy.deepcopy(model)
    t = user_model.side_by_side(
        setup,
        2,
        (twin, setup["optimizer"](twin.parameters())),
        (model, setup["optimizer"](model.parameters())),
        setup["batch_size"],
    )
    n = len(t["plain"])
    check(
        n == len(t["checkpoint"]) and 2 <= n <= 2 * user_model.TIMING_MAX_FACTOR,
        "side_by_side: %d plain and %d checkpointed steps for 2 pairs" % (n, len(t["checkpoint"])),
    )
    check(user_model.timed_enough(t, 2, 0.0), "side_by_side: stopped where timed_enough says go on")
    # side_by_side hands timed_enough its whole wall time: with no other way to stop (no precision is enough, no
    # pair count too many), it stops once the wall cap has passed, within the pair that crossed it.
    saved = user_model.TIMING_PRECISION, user_model.TIMING_MAX_FACTOR, user_model.TIMING_MAX_SECONDS
    user_model.TIMING_PRECISION, user_model.TIMING_MAX_FACTOR, user_model.TIMING_MAX_SECONDS = -1.0, 10**6, 1.0
    try:
        t0 = time.monotonic()
        t = user_model.side_by_side(
            setup,
            2,
            (twin, setup["optimizer"](twin.parameters())),
            (model, setup["optimizer"](model.parameters())),
            setup["batch_size"],
        )
        wall = time.monotonic() - t0
    finally:
        user_model.TIMING_PRECISION, user_model.TIMING_MAX_FACTOR, user_model.TIMING_MAX_SECONDS = saved
    check(1.0 <= wall < 10.0, "side_by_side: %.2f s under a 1 s wall cap" % wall)


def main():
    work = tempfile.mkdtemp(prefix="ckptcheck-test-plan-")
    try:
        for factory in ("tiny", "tiny_tuple"):
            check_placements(os.path.join(work, factory), factory)
        check_rejections(work)
        check_timing_state()
        check_timing_stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("test_plan: %s" % ("%d failure(s)" % len(FAILURES) if FAILURES else "ok"))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
