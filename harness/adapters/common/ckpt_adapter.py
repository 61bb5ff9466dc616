"""The Python side of ckptcheck's adapter protocol (harness/adapters/PROTOCOL.md, version 1).

An adapter module defines a class with
    name, version              framework name and version (strings)
    capabilities() -> dict     the capabilities object, less "protocol" and "serve" (added here)
    run(case, out, mode, options) -> dict   trains `case` and writes results through `out`; returns the meta
                                            fields it knows (saved_activation_bytes, forward_calls, ...)
and ends with `main(MyAdapter)`. Everything about files, argv, serve mode and exit codes lives here.
"""
import gc
import json
import os
import sys
import time
import traceback

import numpy as np

PROTOCOL = 1
# A moe block's fields and their defaults (cases/kinds/moe.cpp); the manifest states every one.
MOE_FIELDS = {"experts": 4, "top_k": 1, "capacity_factor": 1.25, "router_jitter": 0.0, "aux_loss_coef": 0.01}


class BadRequest(Exception):
    """The request cannot be served as asked (an option combination the adapter refuses): exit code 2."""


class Case:
    """A case directory, loaded: the spec, the expanded block list, initial tensors in model order."""

    def __init__(self, case_dir):
        self.dir = case_dir
        with open(os.path.join(case_dir, "case.json")) as f:
            self.spec = json.load(f)
        with open(os.path.join(case_dir, "manifest.json")) as f:
            self.manifest = json.load(f)
        if self.manifest.get("protocol") != PROTOCOL:
            raise ValueError("case directory has protocol %r, this adapter speaks %d"
                             % (self.manifest.get("protocol"), PROTOCOL))
        s = self.spec
        self.dtype_name = s.get("dtype", "double")
        self.dtype = np.float32 if self.dtype_name == "float" else np.float64
        self.batch = s["batch"]
        self.seq = s.get("seq", 1)
        self.width = s["width"]
        self.rows = self.batch * self.seq
        self.loss = s.get("loss", "cross_entropy")
        self.seed = s.get("seed", 1)
        self.rng = s.get("rng", "stateful")
        self.dropout = float(s.get("dropout", 0.0))
        self.lr = float(s.get("lr", 0.01))
        self.steps = int(s.get("steps", 1))
        self.blocks = []
        for b in s["blocks"]:
            share = int(b["share"][1:]) if "share" in b else None
            one = {"kind": b["kind"], "activation": b.get("activation", "gelu"), "heads": b.get("heads", 1),
                   "share": share, "drop_path": float(b.get("drop_path", 0.0))}
            one.update({f: b.get(f, d) for f, d in MOE_FIELDS.items()})
            self.blocks.extend(dict(one) for _ in range(b.get("repeat", 1)))
        # Stochastic layers and the compute precision (PROTOCOL.md, "Stochastic depth, RReLU, bf16"): the
        # manifest states them expanded, one object per block, with every default filled in.
        for i, mb in enumerate(self.manifest.get("blocks", [])):
            self.blocks[i]["drop_path"] = float(mb.get("drop_path", 0.0))
            self.blocks[i]["activation"] = mb.get("activation", self.blocks[i]["activation"])
            for f in MOE_FIELDS:  # a moe block's fields (cases/kinds/moe.cpp), every one stated
                if f in mb:
                    self.blocks[i][f] = mb[f]
        lower, upper = self.manifest.get("rrelu_range", s.get("rrelu_range", [0.125, 1.0 / 3.0]))
        self.rrelu_lower, self.rrelu_upper = float(lower), float(upper)
        self.compute = self.manifest.get("compute", s.get("compute", "exact"))
        if self.compute not in ("exact", "bf16"):
            raise ValueError("case directory: compute %r (exact or bf16)" % self.compute)
        # Whether dL/d(input) is reported: false when the input is data the model must not differentiate, and
        # for token ids (the manifest says so either way).
        self.input_grad = bool(self.manifest["input"].get("requires_grad", s.get("input_grad", True)))
        self.param_names = [p["name"] for p in self.manifest["params"]]
        # The parameters that take a gradient and an update: owners (not a sharing block's copy) of blocks that
        # are not frozen. shared_with: a sharing block's parameter name -> its owner's.
        self.trained_param_names = [p["name"] for p in self.manifest["params"]
                                    if p.get("trains", True) and "shared_with" not in p]
        self.shared_with = {p["name"]: p["shared_with"] for p in self.manifest["params"] if "shared_with" in p}
        self.state_names = [p["name"] for p in self.manifest["state"]]
        self.params = {n: self._load("params", n) for n in self.param_names}
        self.state = {n: self._load("state", n) for n in self.state_names}
        # Language-model cases (PROTOCOL.md, "Token cases"): int64 ids instead of a dense input; x_0 is
        # emb.weight[id] + pos.weight[row mod seq], and after the chain an LM head (LayerNorm, head.weight without
        # bias, cross-entropy over the vocabulary). Tied: head.weight is emb.weight (shared_with, as any share).
        self.tokens_input = self.manifest["input"].get("kind", "dense") == "tokens"
        self.vocab = int(self.manifest["input"].get("vocab", 0))
        self.tied = self.shared_with.get("head.weight") == "emb.weight"
        self.embedding_trains = "emb.weight" in self.trained_param_names
        self.tokens = np.load(os.path.join(case_dir, "tokens.npy")) if self.tokens_input else None
        self.input = None if self.tokens_input else np.load(os.path.join(case_dir, "input.npy"))
        self.labels = np.load(os.path.join(case_dir, "labels.npy")) if self.loss == "cross_entropy" else None
        self.target = np.load(os.path.join(case_dir, "target.npy")) if self.loss == "mse" else None
        # Gradient accumulation (PROTOCOL.md, "Micro-batches"): M passes per step, one per slice of rows.
        self.micro_batches = int(s.get("micro_batches", 1))

    def _load(self, kind, name):
        return np.load(os.path.join(self.dir, kind, name + ".npy"))

    def micro_batch(self, step, m):
        return MicroBatch(self, step, m)


class MicroBatch:
    """Micro-batch m of a step (PROTOCOL.md, "Micro-batches"): rows [m R/M, (m+1) R/M) of the input (or token
    ids) and of the labels or target, M (`count`: its loss is divided by M before backward), and the step number its
    counter-based dropout keys use, step * M + m. Without micro-batches: the whole batch, and the step."""

    def __init__(self, case, step, m):
        M = case.micro_batches
        rows = case.rows // M
        self.index, self.count = m, M
        self.rows = slice(m * rows, (m + 1) * rows)
        self.input = case.input[self.rows] if case.input is not None else None
        # A token case: its rows' ids and positions (row r of the batch is position r mod seq).
        self.tokens = case.tokens[self.rows] if case.tokens is not None else None
        self.positions = np.arange(m * rows, (m + 1) * rows, dtype=np.int64) % case.seq
        self.labels = case.labels[self.rows] if case.labels is not None else None
        self.target = case.target[self.rows] if case.target is not None else None
        self.key_step = step * M + m


def accumulate(total, part, m):
    """The step's sum after micro-batch m: its part as it is for the first, else total + part (a framework's
    .grad, set by the first backward and added to by the next). None (undefined) stays None."""
    if m == 0 or total is None:
        return part
    return total if part is None else total + part


class Output:
    """Writes one run's results in the protocol's layout."""

    def __init__(self, out_dir, case):
        self.dir = out_dir
        self.case = case
        os.makedirs(out_dir, exist_ok=True)

    def step(self, s, loss, grads, input_grad, state, rng_state=None):
        """grads and state: dicts name -> array (any array-like convertible by np.asarray); only the trained
        parameters' gradients are read, and input_grad only when the case's input requires one. A gradient the
        framework left undefined is None: it is listed in missing_grads.json (PROTOCOL.md)."""
        d = os.path.join(self.dir, "step%d" % s)
        os.makedirs(os.path.join(d, "grads"), exist_ok=True)
        os.makedirs(os.path.join(d, "state"), exist_ok=True)
        dt = self.case.dtype
        np.save(os.path.join(d, "loss.npy"), np.asarray(loss, dtype=dt).reshape(()))
        missing = []  # gradients autograd left undefined (None): listed, not written as zeros
        for n in self.case.trained_param_names:
            if grads[n] is None:
                missing.append(n)
                continue
            g = np.ascontiguousarray(np.asarray(grads[n]))
            np.save(os.path.join(d, "grads", n + ".npy"), g.reshape(self.case.params[n].shape))
        if self.case.input_grad:
            if input_grad is None:
                missing.append("input_grad")
            else:
                np.save(os.path.join(d, "input_grad.npy"), np.ascontiguousarray(np.asarray(input_grad)))
        if missing:
            with open(os.path.join(d, "missing_grads.json"), "w") as f:
                json.dump(missing, f)
        for n in self.case.state_names:
            v = np.ascontiguousarray(np.asarray(state[n]))
            np.save(os.path.join(d, "state", n + ".npy"), v.reshape(self.case.state[n].shape))
        if rng_state is not None:
            np.save(os.path.join(d, "rng_state.npy"), np.frombuffer(bytes(rng_state), dtype=np.uint8))

    def meta(self, fields):
        with open(os.path.join(self.dir, "meta.json"), "w") as f:
            json.dump(fields, f, indent=1)


def _check_options(caps, options):
    known = caps.get("options", {})
    for k, v in options.items():
        if k not in known:
            raise BadRequest("unknown option '%s' (known: %s)" % (k, ", ".join(sorted(known)) or "none"))
        values = known[k].get("values")
        if values == "int":
            if not v.lstrip("-").isdigit():
                raise BadRequest("option %s=%s: must be an integer" % (k, v))
        elif isinstance(values, list) and v not in values:
            raise BadRequest("option %s=%s: must be one of %s" % (k, v, ", ".join(values)))


def _capabilities(adapter):
    caps = dict(adapter.capabilities())
    caps["protocol"] = PROTOCOL
    caps["framework"] = adapter.name
    caps["version"] = adapter.version
    caps.setdefault("serve", True)
    return caps


def _run_one(adapter, caps, case_dir, out_dir, mode, options):
    if mode not in ("plain", "checkpoint"):
        raise BadRequest("mode must be plain or checkpoint (got %r)" % mode)
    _check_options(caps, options)
    case = Case(case_dir)
    out = Output(out_dir, case)
    t0 = time.perf_counter()
    meta = adapter.run(case, out, mode, dict(options)) or {}
    full = {"protocol": PROTOCOL, "framework": adapter.name, "version": adapter.version, "mode": mode,
            "options": options, "steps": case.steps, "saved_activation_bytes": None, "forward_calls": None,
            "recomputed_blocks": None, "step_seconds": None, "run_seconds": time.perf_counter() - t0}
    full.update(meta)
    out.meta(full)


def _parse_run_args(argv):
    args = {"options": {}}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--case-dir", "--out-dir", "--mode", "--option") and i + 1 < len(argv):
            v = argv[i + 1]
            if a == "--option":
                if "=" not in v:
                    raise BadRequest("--option wants KEY=VALUE (got %r)" % v)
                k, val = v.split("=", 1)
                args["options"][k] = val
            else:
                args[a[2:].replace("-", "_")] = v
            i += 2
        else:
            raise BadRequest("unexpected argument %r" % a)
    for k in ("case_dir", "out_dir", "mode"):
        if k not in args:
            raise BadRequest("run needs --%s" % k.replace("_", "-"))
    return args


def _serve(adapter, caps):
    # stdout carries replies only: anything a library prints goes to stderr.
    reply_stream = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            if req.get("command") == "quit":
                break
            if req.get("command") != "run":
                raise BadRequest("unknown command %r" % req.get("command"))
            _run_one(adapter, caps, req["case_dir"], req["out_dir"], req["mode"],
                     {str(k): str(v) for k, v in req.get("options", {}).items()})
            reply = {"ok": True}
        except BadRequest as e:
            reply = {"ok": False, "error": str(e), "bad_request": True}
        except Exception as e:  # the harness reports it as an adapter fault, with the traceback on stderr
            traceback.print_exc()
            reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e), "bad_request": False}
        reply_stream.write(json.dumps(reply) + "\n")
        reply_stream.flush()
        # What the request left alive (the framework's modules, imported by the first one, and caches) moves out
        # of the collector's reach, so later requests' collections do not walk torch's object graph again (5% of
        # a PyTorch validate's time). Collected first: no garbage is frozen.
        gc.collect()
        gc.freeze()


def main(adapter_class):
    argv = sys.argv[1:]
    usage = ("usage: adapter.py capabilities | run --case-dir D --out-dir O --mode plain|checkpoint [--option K=V]... "
             "| serve")
    if not argv:
        print(usage, file=sys.stderr)
        sys.exit(2)
    try:
        adapter = adapter_class()
        caps = _capabilities(adapter)
        if argv[0] == "capabilities":
            print(json.dumps(caps))
        elif argv[0] == "run":
            a = _parse_run_args(argv[1:])
            _run_one(adapter, caps, a["case_dir"], a["out_dir"], a["mode"], a["options"])
        elif argv[0] == "serve":
            _serve(adapter, caps)
        else:
            raise BadRequest(usage)
    except BadRequest as e:
        print("adapter: %s" % e, file=sys.stderr)
        sys.exit(2)
    except Exception:
        traceback.print_exc()
        sys.exit(1)
