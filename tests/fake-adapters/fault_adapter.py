#!/usr/bin/env python3
"""A deliberately broken adapter (harness/adapters/PROTOCOL.md) for tests/adapter_faults_test.cpp.

    fault_adapter.py FAULT capabilities | run ... | serve

The numpy adapter does the real work (so a healthy run passes every check); FAULT then breaks one thing:

  none                 healthy: the control
  exit-nonzero         run exits 1 after writing everything
  crash                run kills itself with SIGSEGV
  hang                 run never returns (sleeps), leaving a grandchild in its process group
  hang-capabilities    the capabilities query never returns
  capabilities-garbage capabilities prints something that is not JSON
  capabilities-protocol capabilities speaks protocol 99
  writes-nothing       run exits 0 and writes nothing
  missing-step         the last step's directory is missing
  garbage-meta         meta.json is not JSON
  garbage-npy          loss.npy is random bytes
  truncated-npy        a gradient's .npy is cut in half
  wrong-shape          a gradient has the wrong shape (transposed)
  wrong-dtype          a gradient is float32 in a double case
  nan                  a gradient is NaN in every mode
  nan-checkpoint       a gradient is NaN in the checkpoint mode only
  inf                  the loss is +inf in every mode
  serve-crash          serve mode: the server exits on the first request without answering
  serve-garbage        serve mode: the server answers with a line that is not JSON
  serve-hang           serve mode: the server never answers
  flood-stderr         run writes 50 MB to stderr, then fails

Capabilities are the numpy adapter's, restricted to mlp blocks in double so the harness's cases stay small.
"""

import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NUMPY_ADAPTER = os.path.join(HERE, "..", "..", "harness", "adapters", "numpy", "adapter.py")
SERVE_FAULTS = ("serve-crash", "serve-garbage", "serve-hang")


def numpy_adapter(args):
    return subprocess.run(
        [sys.executable, NUMPY_ADAPTER] + args, stdout=subprocess.PIPE, stderr=sys.stderr.buffer, check=False
    )


def numpy_adapter_run(args):
    """The numpy adapter's `run` in this process: one interpreter and one numpy import per run, not two (a
    finding's shrink runs the adapter dozens of times)."""
    import runpy

    argv = sys.argv
    sys.argv = [NUMPY_ADAPTER, "run"] + args
    try:
        runpy.run_path(NUMPY_ADAPTER, run_name="__main__")
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = argv


def capabilities(fault):
    if fault == "hang-capabilities":
        time.sleep(3600)
    if fault == "capabilities-garbage":
        print("Traceback (most recent call last): this is not JSON {{{")
        return
    r = numpy_adapter(["capabilities"])
    caps = json.loads(r.stdout)
    caps["blocks"] = ["mlp"]
    caps["dtypes"] = ["double"]
    caps["serve"] = fault in SERVE_FAULTS
    if fault == "capabilities-protocol":
        caps["protocol"] = 99
    print(json.dumps(caps))


def npy_paths(out_dir, sub):
    step = os.path.join(out_dir, "step0", sub)
    return sorted(os.path.join(step, f) for f in os.listdir(step) if f.endswith(".npy"))


def corrupt(fault, out_dir, mode):
    import numpy as np

    grad = npy_paths(out_dir, "grads")[0]
    loss = os.path.join(out_dir, "step0", "loss.npy")
    if fault == "missing-step":
        steps = sorted(d for d in os.listdir(out_dir) if d.startswith("step"))
        subprocess.run(["rm", "-rf", os.path.join(out_dir, steps[-1])], check=True)
    elif fault == "garbage-meta":
        with open(os.path.join(out_dir, "meta.json"), "w") as f:
            f.write('{"protocol": 1, "steps": [oops')
    elif fault == "garbage-npy":
        with open(loss, "wb") as f:
            f.write(os.urandom(300))
    elif fault == "truncated-npy":
        data = open(grad, "rb").read()
        with open(grad, "wb") as f:
            f.write(data[: len(data) // 2])
    elif fault == "wrong-shape":
        a = np.load(grad)
        np.save(grad, a.T.copy() if a.ndim == 2 and a.shape[0] != a.shape[1] else a.reshape(-1, 1))
    elif fault == "wrong-dtype":
        np.save(grad, np.load(grad).astype(np.float32))
    elif fault == "nan" or (fault == "nan-checkpoint" and mode == "checkpoint"):
        a = np.load(grad)
        a[...] = np.nan
        np.save(grad, a)
    elif fault == "inf":
        np.save(loss, np.array(np.inf, dtype=np.load(loss).dtype))


def run(fault, args):
    out_dir = args[args.index("--out-dir") + 1]
    mode = args[args.index("--mode") + 1]
    if fault == "hang":
        # A grandchild in the same process group, as a framework's worker would be: the timeout must kill it too.
        child = subprocess.Popen(["sleep", "3600"])
        pid_file = os.environ.get("FAULT_ADAPTER_PIDFILE")
        if pid_file:
            with open(pid_file, "w") as f:
                f.write(str(child.pid))
        time.sleep(3600)
    if fault == "writes-nothing":
        return 0
    if fault == "flood-stderr":
        chunk = "x" * 1023 + "\n"
        for _ in range(50 * 1024):
            sys.stderr.write(chunk)
        return 1
    code = numpy_adapter_run(args)
    if code != 0:
        return code
    if fault == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "exit-nonzero":
        print("fault_adapter: simulated failure", file=sys.stderr)
        return 1
    corrupt(fault, out_dir, mode)
    return 0


def serve(fault):
    for line in sys.stdin:
        if not line.strip():
            continue
        if fault == "serve-crash":
            os._exit(1)
        if fault == "serve-garbage":
            sys.stdout.write("I am not JSON\n")
            sys.stdout.flush()
            continue
        if fault == "serve-hang":
            time.sleep(3600)


def main():
    fault, command, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if command == "capabilities":
        capabilities(fault)
        return 0
    if command == "run":
        return run(fault, rest)
    if command == "serve":
        serve(fault)
        return 0
    print("fault_adapter: unknown command %r" % command, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
