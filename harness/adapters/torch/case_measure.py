"""The torch case adapter's measuring pass (adapter.py; harness/user_model/torch/USER_MODEL.md, "The compared runs
are yours", applies to ckptcheck's own cases too). The run whose results validate compares trains without the
saved-tensor hooks; a forked child then trains the same case again with them, in a process of its own, and its saved
bytes are reported only if its step 0 (loss, gradients, input gradient, state, generator) equals the compared run's
bit for bit: the hooks act in step 0 alone, so the pass stops there. Otherwise meta's saved_activation_bytes is null and
instruments_changed says what differed."""

import json
import os

import numpy as np


class Recorder:
    """Forwards each step to the protocol's Output (None: record only) and keeps its bytes for the comparison."""

    def __init__(self, out):
        self.out = out
        self.steps = []

    def step(self, s, loss, grads, input_grad, state, rng_state=None):
        if self.out is not None:
            self.out.step(s, loss, grads, input_grad, state, rng_state)
        record = {
            "loss": np.asarray(loss).tobytes(),
            "input_grad": None if input_grad is None else np.ascontiguousarray(np.asarray(input_grad)).tobytes(),
            "rng": bytes(rng_state or b""),
        }
        for kind, values in (("grad", grads), ("state", state)):
            for n, v in values.items():
                record["%s %s" % (kind, n)] = None if v is None else np.ascontiguousarray(np.asarray(v)).tobytes()
        self.steps.append(record)


def first_difference(a, b):
    for s, (x, y) in enumerate(zip(a.steps, b.steps, strict=False)):  # unequal counts: said below
        for key in x:
            if x[key] != y.get(key):
                return "step %d %s" % (s, key)
    return None if len(a.steps) == len(b.steps) else "step count %d vs %d" % (len(a.steps), len(b.steps))


def run(run_case, case, out, mode, options):
    """run_case(case, out, mode, options, measure): case_model.run. The compared run first, untouched; then the
    measuring child. Returns the compared run's meta with the child's saved bytes when the child changed nothing."""
    compared = Recorder(out)
    meta = run_case(case, compared, mode, options, measure=False)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the measuring pass: nothing it does reaches the parent but this one line
        os.close(read)
        code = 0
        try:
            measured = Recorder(None)
            m = run_case(case, measured, mode, options, measure=True)
            answer = {"saved": m["saved_activation_bytes"], "changed": first_difference(compared, measured)}
        except Exception as e:  # noqa: BLE001 - reported to the parent, which keeps the compared run's results
            answer, code = {"error": "%s: %s" % (type(e).__name__, e)}, 1
        os.write(write, json.dumps(answer).encode())
        os._exit(code)
    os.close(write)
    chunks = []
    while True:
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    try:
        answer = json.loads(b"".join(chunks).decode() or "{}")
    except ValueError:
        answer = {"error": "the measuring pass died"}
    if answer.get("changed") is None and "error" not in answer and answer:
        meta["saved_activation_bytes"] = [answer["saved"][0]] * case.steps  # every step saves what step 0 does
    else:
        meta["saved_activation_bytes"] = None
        meta["instruments_changed"] = "the saved-tensor hooks' pass: " + (
            answer.get("changed") or answer.get("error") or "no answer"
        )
    return meta
