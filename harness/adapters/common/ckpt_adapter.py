"""The Python side of ckptcheck's adapter protocol (harness/adapters/PROTOCOL.md, version 1).

An adapter module defines a class with
    name, version              framework name and version (strings)
    capabilities() -> dict     the capabilities object, less "protocol" and "serve" (added here)
    run(case, out, mode, options) -> dict   trains `case` and writes results through `out`; returns the meta
                                            fields it knows (saved_activation_bytes, forward_calls, ...)
and ends with `main(MyAdapter)`. Everything about files, argv, serve mode and exit codes lives here.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import numpy as np

PROTOCOL = 1


class BadRequest(Exception):
    """The request cannot be served as asked (an option combination the adapter refuses): exit code 2."""


@dataclass(frozen=True)
class Block:
    """One block of the chain as the manifest states it: its kind's fields with every default filled in by
    ckptcheck (cases/kinds/), so an adapter knows no default of the case format. A field another kind has is None."""

    kind: str  # mlp, residual-bn, transformer or moe
    drop_path: float  # stochastic depth's drop probability; 0 when off
    share: Optional[int] = None  # the block whose parameters this one uses (case.json's "share": "b<j>"), or None
    activation: Optional[str] = None  # mlp: relu, gelu, tanh or rrelu
    heads: Optional[int] = None  # transformer
    experts: Optional[int] = None  # moe: its fields (cases/kinds/moe.cpp)
    top_k: Optional[int] = None
    capacity_factor: Optional[float] = None
    router_jitter: Optional[float] = None
    aux_loss_coef: Optional[float] = None

    @classmethod
    def from_manifest(cls, entry: Mapping[str, Any], share: Optional[int]) -> Block:
        """The block of a manifest's "blocks" entry; `share` comes from the case (the manifest does not repeat it)."""
        fields = {k: entry[k] for k in cls.__dataclass_fields__ if k in entry and k not in ("drop_path", "share")}
        return cls(drop_path=float(entry["drop_path"]), share=share, **fields)


class Case:
    """A case directory, loaded: the spec, the expanded block list, initial tensors in model order.

    The case-level fields come from case.json (cases/SCHEMA.md, with its defaults for the fields a case may omit);
    the blocks, the RReLU range, the compute precision and what takes a gradient from manifest.json, which states
    every one of them."""

    dir: str
    spec: dict
    manifest: dict
    dtype_name: str  # "float" or "double"
    dtype: type  # np.float32 or np.float64
    batch: int
    seq: int
    width: int
    rows: int  # batch * seq: the rows of every activation
    loss: str  # "cross_entropy" or "mse"
    seed: int
    rng: str  # "stateful" or "counter"
    dropout: float
    lr: float
    steps: int
    blocks: list[Block]
    rrelu_lower: float
    rrelu_upper: float
    compute: str  # "exact" or "bf16"
    input_grad: bool  # whether dL/d(input) is reported
    param_names: list[str]  # every parameter, in model order
    trained_param_names: list[str]  # those that take a gradient and an update
    shared_with: dict[str, str]  # a sharing block's parameter name -> its owner's
    state_names: list[str]
    params: dict[str, np.ndarray]
    state: dict[str, np.ndarray]
    tokens_input: bool
    vocab: int
    tied: bool
    embedding_trains: bool
    tokens: Optional[np.ndarray]
    input: Optional[np.ndarray]
    labels: Optional[np.ndarray]
    target: Optional[np.ndarray]
    micro_batches: int

    def __init__(self, case_dir: str) -> None:
        self.dir = case_dir
        with open(os.path.join(case_dir, "case.json")) as f:
            self.spec = json.load(f)
        with open(os.path.join(case_dir, "manifest.json")) as f:
            self.manifest = json.load(f)
        if self.manifest.get("protocol") != PROTOCOL:
            raise ValueError(
                "case directory has protocol %r, this adapter speaks %d" % (self.manifest.get("protocol"), PROTOCOL)
            )
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
        # Which block's parameters each block uses is the case's (folded runs expanded); everything else about a
        # block, the manifest's (PROTOCOL.md, "Stochastic depth, RReLU, bf16"): one object per block.
        shares = [int(b["share"][1:]) if "share" in b else None for b in s["blocks"] for _ in range(b.get("repeat", 1))]
        self.blocks = [
            Block.from_manifest(mb, share) for mb, share in zip(self.manifest["blocks"], shares, strict=True)
        ]
        self.rrelu_lower, self.rrelu_upper = (float(v) for v in self.manifest["rrelu_range"])
        self.compute = self.manifest["compute"]
        if self.compute not in ("exact", "bf16"):
            raise ValueError("case directory: compute %r (exact or bf16)" % self.compute)
        # Whether dL/d(input) is reported: false when the input is data the model must not differentiate, and
        # for token ids (the manifest says so either way).
        self.input_grad = bool(self.manifest["input"]["requires_grad"])
        self.param_names = [p["name"] for p in self.manifest["params"]]
        # The parameters that take a gradient and an update: owners (not a sharing block's copy) of blocks that
        # are not frozen. shared_with: a sharing block's parameter name -> its owner's.
        self.trained_param_names = [
            p["name"] for p in self.manifest["params"] if p.get("trains", True) and "shared_with" not in p
        ]
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

    def _load(self, kind: str, name: str) -> np.ndarray:
        return np.load(os.path.join(self.dir, kind, name + ".npy"))

    def micro_batch(self, step: int, m: int) -> MicroBatch:
        """Micro-batch m of step `step` (the whole batch without micro-batches)."""
        return MicroBatch(self, step, m)


class MicroBatch:
    """Micro-batch m of a step (PROTOCOL.md, "Micro-batches"): rows [m R/M, (m+1) R/M) of the input (or token
    ids) and of the labels or target, M (`count`: its loss is divided by M before backward), and the step number its
    counter-based dropout keys use, step * M + m. Without micro-batches: the whole batch, and the step."""

    index: int
    count: int  # M
    rows: slice
    input: Optional[np.ndarray]
    tokens: Optional[np.ndarray]
    positions: np.ndarray
    labels: Optional[np.ndarray]
    target: Optional[np.ndarray]
    key_step: int

    def __init__(self, case: Case, step: int, m: int) -> None:
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


def accumulate(total: Any, part: Any, m: int) -> Any:
    """The step's sum after micro-batch m: its part as it is for the first, else total + part (a framework's
    .grad, set by the first backward and added to by the next). None (undefined) stays None."""
    if m == 0 or total is None:
        return part
    return total if part is None else total + part


class Output:
    """Writes one run's results in the protocol's layout."""

    def __init__(self, out_dir: str, case: Case) -> None:
        self.dir = out_dir
        self.case = case
        os.makedirs(out_dir, exist_ok=True)

    def step(
        self,
        s: int,
        loss: Any,
        grads: Mapping[str, Any],
        input_grad: Any,
        state: Mapping[str, Any],
        rng_state: Optional[bytes] = None,
    ) -> None:
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

    def meta(self, fields: Mapping[str, Any]) -> None:
        """meta.json: the run's fields (PROTOCOL.md, \"meta.json\")."""
        with open(os.path.join(self.dir, "meta.json"), "w") as f:
            json.dump(fields, f, indent=1)


def _check_options(caps: Mapping[str, Any], options: Mapping[str, str]) -> None:
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


def _capabilities(adapter: Any) -> dict:
    caps = dict(adapter.capabilities())
    caps["protocol"] = PROTOCOL
    caps["framework"] = adapter.name
    caps["version"] = adapter.version
    caps.setdefault("serve", True)
    return caps


def _run_one(
    adapter: Any, caps: Mapping[str, Any], case_dir: str, out_dir: str, mode: str, options: Mapping[str, str]
) -> None:
    if mode not in ("plain", "checkpoint"):
        raise BadRequest("mode must be plain or checkpoint (got %r)" % mode)
    _check_options(caps, options)
    case = Case(case_dir)
    out = Output(out_dir, case)
    t0 = time.perf_counter()
    meta = adapter.run(case, out, mode, dict(options)) or {}
    full = {
        "protocol": PROTOCOL,
        "framework": adapter.name,
        "version": adapter.version,
        "mode": mode,
        "options": options,
        "steps": case.steps,
        "saved_activation_bytes": None,
        "forward_calls": None,
        "recomputed_blocks": None,
        "step_seconds": None,
        "run_seconds": time.perf_counter() - t0,
    }
    full.update(meta)
    out.meta(full)


def _parse_run_args(argv: list[str]) -> dict:
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


def _serve(adapter: Any, caps: Mapping[str, Any]) -> None:
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
            _run_one(
                adapter,
                caps,
                req["case_dir"],
                req["out_dir"],
                req["mode"],
                {str(k): str(v) for k, v in req.get("options", {}).items()},
            )
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


def main(adapter_class: Callable[[], Any]) -> None:
    """The adapter's command line (PROTOCOL.md, \"Commands\"): capabilities, run or serve, with the protocol's exit
    codes: 2 for a BadRequest, 1 for anything else the adapter raises."""
    argv = sys.argv[1:]
    usage = (
        "usage: adapter.py capabilities | run --case-dir D --out-dir O --mode plain|checkpoint [--option K=V]... "
        "| serve"
    )
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
