"""The torch side of the PyTorch adapter (adapter.py, which documents the model): the case's model built from
torch modules and its training loop, plain or under torch.utils.checkpoint. adapter.py imports this module on its
first run request only, so a `capabilities` query does not pay for importing torch."""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.utils.checkpoint as tc  # noqa: E402
from ckpt_adapter import BadRequest, Block, Case, MicroBatch, Output  # noqa: E402
from saved_bytes import SavedBytes  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

HAS_SAC = hasattr(tc, "create_selective_checkpoint_contexts") and hasattr(tc, "CheckpointPolicy")


class Counted(nn.Module):
    """Counts the forward calls of a block (initial forward and recompute alike)."""

    def __init__(self, counts: list[int], index: int) -> None:
        super().__init__()
        self._counts = counts
        self._index = index

    def count(self) -> None:
        """One more forward call of this block."""
        self._counts[self._index] += 1


class DropPath(nn.Module):
    """timm's DropPath (timm.layers.drop_path, scale_by_keep) on x viewed as (samples, seq, width): one Bernoulli
    draw per sample from torch's generator, the kept samples scaled by 1 / (1 - p)."""

    def __init__(self, p: float, seq: int) -> None:
        super().__init__()
        self.p, self.seq = p, seq

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = 1 - self.p
        xs = x.reshape(-1, self.seq, x.shape[-1])
        random_tensor = xs.new_empty((xs.shape[0], 1, 1)).bernoulli_(keep)
        if keep > 0.0:
            random_tensor.div_(keep)
        return (xs * random_tensor).reshape(x.shape)


class MlpBlock(Counted):
    def __init__(
        self, counts: list[int], index: int, width: int, activation: str, p: float, rrelu_range: Sequence[float]
    ) -> None:
        super().__init__(counts, index)
        self.fc = nn.Linear(width, width)
        self.act = {
            "relu": nn.ReLU,
            "tanh": nn.Tanh,
            "gelu": lambda: nn.GELU(approximate="tanh"),
            "rrelu": lambda: nn.RReLU(*rrelu_range),
        }[activation]()
        self.dropout = nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y = Dropout(act(fc x)) (numpy's mlp_forward)."""
        self.count()
        return self.dropout(self.act(self.fc(x)))


class ResidualBnBlock(Counted):
    def __init__(self, counts: list[int], index: int, width: int, drop_path: float, seq: int) -> None:
        super().__init__(counts, index)
        self.fc = nn.Linear(width, width)
        self.bn = nn.BatchNorm1d(width, eps=1e-5, momentum=0.1)
        self.drop_path = DropPath(drop_path, seq)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y = x + DropPath(ReLU(BatchNorm(fc x)))."""
        self.count()
        return x + self.drop_path(F.relu(self.bn(self.fc(x))))


class TransformerBlock(Counted):
    def __init__(
        self, counts: list[int], index: int, width: int, heads: int, seq: int, p: float, drop_path: float
    ) -> None:
        super().__init__(counts, index)
        self.heads, self.seq, self.p = heads, seq, p
        self.ln1 = nn.LayerNorm(width, eps=1e-5)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.drop1 = nn.Dropout(p)
        self.ln2 = nn.LayerNorm(width, eps=1e-5)
        self.fc1 = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(4 * width, width)
        self.drop2 = nn.Dropout(p)
        self.drop_path1 = DropPath(drop_path, seq)  # timm's ViT Block: after the branch's dropout, before the add
        self.drop_path2 = DropPath(drop_path, seq)

    def attention(self, qkv: torch.Tensor) -> torch.Tensor:
        """Causal multi-head attention of packed q|k|v rows, dropout on its probabilities."""
        rows, c3 = qkv.shape
        c = c3 // 3
        hd = c // self.heads
        b = rows // self.seq
        q, k, v = (t.reshape(b, self.seq, self.heads, hd).transpose(1, 2) for t in qkv.split(c, dim=1))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        future = torch.triu(torch.ones(self.seq, self.seq, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1)
        att = F.dropout(att, self.p, training=self.training)
        return (att @ v).transpose(1, 2).reshape(rows, c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Pre-LN GPT block: attention then gelu MLP, each branch with dropout and drop path."""
        self.count()
        h = x + self.drop_path1(self.drop1(self.proj(self.attention(self.qkv(self.ln1(x))))))
        return h + self.drop_path2(self.drop2(self.fc2(self.gelu(self.fc1(self.ln2(h))))))


class MoE(nn.Module):
    """Switch-Transformer-style mixture of experts written with torch ops, as Megatron-LM's and OLMo-core's MoE
    layers are: a router nn.Linear (HF SwitchTransformers' multiplicative jitter on its input, uniform in
    [1 - eps, 1 + eps] from torch's generator in training), softmax, top-k by a stable descending sort (ties to the
    smaller expert index; torch.topk does not promise an order for ties), capacity-limited dispatch (first choices
    of every token, then second choices; an assignment to a full expert dropped), experts nn.Sequential(Linear,
    GELU tanh, Linear) over their capacity-padded buffers, the gate-weighted sum back per token. Side effects, as in
    those libraries: the tokens per expert go into the `expert_counts` buffer and coef * aux into the `aux_loss`
    tracker buffer, and coef * aux (with its graph) is appended to `aux_losses`, a list the training loop sets before
    each pass and adds into the loss. Nothing guards them against a checkpoint's recompute (docs/frameworks.md's
    findings).
    Two options show the fixes: moe_state=guarded moves the buffers only outside a backward pass (where every
    checkpoint recompute runs); moe_aux=attach records the aux loss detached (for the reported loss only) and
    attaches its gradient to the layer's output, as Megatron-LM's MoEAuxLossAutoScaler does."""

    guarded = False
    attach = False

    def __init__(self, width: int, spec: Block, micro_batches: int) -> None:
        super().__init__()
        self.E, self.k = int(spec.experts), int(spec.top_k)
        # The aux loss is divided by the micro-batches like the main loss (a gradient-accumulation loop's loss / M).
        self.cf, self.jitter, self.coef = (
            float(spec.capacity_factor),
            float(spec.router_jitter),
            float(spec.aux_loss_coef) / micro_batches,
        )
        self.router = nn.Linear(width, self.E)
        for e in range(self.E):
            setattr(
                self,
                "expert%d" % e,
                nn.Sequential(
                    collections.OrderedDict(
                        fc1=nn.Linear(width, 4 * width),
                        gelu=nn.GELU(approximate="tanh"),
                        fc2=nn.Linear(4 * width, width),
                    )
                ),
            )
        self.register_buffer("expert_counts", torch.zeros(1, self.E))
        self.register_buffer("aux_loss", torch.zeros(1, 1))
        self.aux_losses = []

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        rows, E, k = h.shape[0], self.E, self.k
        a = h
        if self.training and self.jitter > 0:
            a = h * torch.empty_like(h).uniform_(1.0 - self.jitter, 1.0 + self.jitter)
        probs = self.router(a).softmax(dim=-1)
        # The routing decision is not differentiated: sorting probs itself would build a SortBackward node that
        # saves its indices and dies with the unused sorted values, a save the first step's byte count would see.
        choice = torch.sort(probs.detach(), dim=-1, descending=True, stable=True).indices[:, :k]
        cap = min(rows, max(1, math.ceil(((self.cf * rows) * k) / E)))
        expert = choice.t().reshape(-1)  # rank-major: every token's first choice, then every second choice
        onehot = F.one_hot(expert, E)
        slot = ((onehot.cumsum(0) - 1) * onehot).sum(1)  # the assignment's place in its expert's buffer
        token = torch.arange(rows).repeat(k)
        keep = slot < cap
        expert, slot, token = expert[keep], slot[keep], token[keep]
        f = onehot.sum(0).to(probs.dtype) / (rows * k)  # top-k share per expert, before capacity
        aux = E * (f * (probs.sum(0) / rows)).sum()
        if self.training:
            if not self.guarded or torch._C._current_graph_task_id() == -1:
                with torch.no_grad():
                    counts = torch.bincount(expert, minlength=E).to(self.expert_counts.dtype).reshape(1, E)
                    self.expert_counts += counts
                    self.aux_loss += self.coef * aux.to(self.aux_loss.dtype)
            self.aux_losses.append((self.coef * aux).detach() if self.attach else self.coef * aux)
        where = expert * cap + slot
        buffers = h.new_zeros(E * cap, h.shape[1]).index_put((where,), h[token])
        z = torch.cat([getattr(self, "expert%d" % e)(buffers[e * cap : (e + 1) * cap]) for e in range(E)])
        gate = probs[token, expert]
        contrib = gate[:, None] * z[where]
        out = torch.zeros(rows, h.shape[1], dtype=contrib.dtype).index_add(0, token, contrib)
        return AuxLossAutoScaler.apply(out, self.coef * aux) if self.attach and self.training else out


class AuxLossAutoScaler(torch.autograd.Function):
    """Megatron-LM's MoEAuxLossAutoScaler: the output unchanged; backward gives the aux loss the gradient 1, so it
    trains through the graph of whichever forward built this node (a recompute's, under reentrant checkpoint)."""

    @staticmethod
    def forward(ctx: Any, output: torch.Tensor, aux_loss: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux_loss)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        (aux_loss,) = ctx.saved_tensors
        return grad_output, torch.ones_like(aux_loss)


class MoeBlock(Counted):
    """y = x + DropPath(Dropout(MoE(LayerNorm x)))."""

    def __init__(
        self, counts: list[int], index: int, width: int, spec: Block, p: float, seq: int, micro_batches: int
    ) -> None:
        super().__init__(counts, index)
        self.ln = nn.LayerNorm(width, eps=1e-5)
        self.moe = MoE(width, spec, micro_batches)
        self.drop = nn.Dropout(p)
        self.drop_path = DropPath(spec.drop_path, seq)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """y = x + DropPath(Dropout(MoE(LayerNorm x)))."""
        self.count()
        return x + self.drop_path(self.drop(self.moe(self.ln(x))))


class LmHead(nn.Module):
    """GPT-2's final LayerNorm and LM head: logits = LN(x) W^T, no bias."""

    def __init__(self, width: int, vocab: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(width, eps=1e-5)
        self.out = nn.Linear(width, vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits: the final LayerNorm, then the vocabulary projection."""
        return self.out(self.ln(x))


class Lm(nn.Module):
    """A token case's modules outside the chain: token and position embeddings, the head."""

    def __init__(self, vocab: int, seq: int, width: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(seq, width)
        self.head = LmHead(width, vocab)

    def stem(self, mb: MicroBatch) -> torch.Tensor:
        """x_0 of a token micro-batch: token plus position embeddings."""
        return self.emb(torch.from_numpy(mb.tokens)) + self.pos(torch.from_numpy(mb.positions))


class Model(nn.Module):
    """The chain (an nn.Sequential of the blocks, what checkpointing wraps) and, for a token case, its Lm."""

    def __init__(self, chain: torch.nn.Sequential, lm: Lm | None) -> None:
        super().__init__()
        self.chain = chain
        self.lm = lm


def start_moe_pass(moe_blocks: list[MoeBlock]) -> list[torch.Tensor]:
    """A pass (micro-batch) starts: each moe block's aux_loss tracker zeroed (with the gradients, per pass) and the
    list its forward records coef * aux into, returned."""
    aux_losses = []
    for blk in moe_blocks:
        blk.moe.aux_losses = aux_losses
        blk.moe.aux_loss.zero_()
    return aux_losses


def build(case: Case, counts: list[int]) -> Model:
    """The case's model with the manifest's initial values, every block counting its forwards into `counts`."""
    blocks = []
    for i, b in enumerate(case.blocks):
        if b.kind == "mlp":
            blocks.append(
                MlpBlock(counts, i, case.width, b.activation, case.dropout, (case.rrelu_lower, case.rrelu_upper))
            )
        elif b.kind == "moe":
            blocks.append(MoeBlock(counts, i, case.width, b, case.dropout, case.seq, case.micro_batches))
        elif b.kind == "residual-bn":
            blocks.append(ResidualBnBlock(counts, i, case.width, b.drop_path, case.seq))
        else:
            blocks.append(TransformerBlock(counts, i, case.width, b.heads, case.seq, case.dropout, b.drop_path))
    lm = Lm(case.vocab, case.seq, case.width) if case.tokens_input else None
    model = Model(nn.Sequential(*blocks), lm).to(torch.float32 if case.dtype == np.float32 else torch.float64)
    # Shared parameters by assignment (ALBERT-style tying): the sharing block's module attribute becomes the
    # owner's Parameter, so autograd sums the uses' gradients into one .grad.
    for name, owner in case.shared_with.items():
        path = torch_name(name).split(".")
        setattr(model.get_submodule(".".join(path[:-1])), path[-1], model.get_parameter(torch_name(owner)))
    named = dict(model.named_parameters())  # each shared Parameter once, under its owner's name
    buffers = dict(model.named_buffers())
    with torch.no_grad():
        for name in case.param_names:
            if name not in case.shared_with:
                t = named[torch_name(name)]
                t.copy_(torch.from_numpy(case.params[name]).reshape(t.shape))
        for name in case.state_names:
            t = buffers[torch_name(name)]
            t.copy_(torch.from_numpy(case.state[name]).reshape(t.shape))
    if len(named) != len(case.param_names) - len(case.shared_with):
        raise ValueError("model has %d parameters, the case %d" % (len(named), len(case.param_names)))
    trained = set(case.trained_param_names)
    for name in case.param_names:  # frozen blocks: requires_grad_(False), as a fine-tune freezes layers
        if name not in case.shared_with and name not in trained:
            named[torch_name(name)].requires_grad_(False)
    return model


def grad_or_none(p: torch.Tensor) -> Any:
    """A parameter's gradient as an array; None where autograd left none (reported as missing)."""
    return p.grad.detach().numpy() if p.grad is not None else None


LM_NAMES = {"head.weight": "head.out.weight"}


def torch_name(case_name: str) -> str:
    """b3.fc.weight -> chain.3.fc.weight (nn.Sequential's naming); emb.weight -> lm.emb.weight,
    head.weight -> lm.head.out.weight."""
    if case_name[0] == "b" and case_name[1].isdigit():
        return "chain." + case_name[1:]
    return "lm." + LM_NAMES.get(case_name, case_name)


def selective_policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    """checkpoint=selective's policy: save the matrix products' outputs, recompute everything else."""
    aten = torch.ops.aten
    if op in (aten.mm.default, aten.addmm.default, aten.bmm.default):
        return tc.CheckpointPolicy.MUST_SAVE
    return tc.CheckpointPolicy.PREFER_RECOMPUTE


def recomputed_blocks(mode: str, how: str, L: int, segments: int) -> list[int]:
    """The blocks a checkpointed run of `how` recomputes (none in the plain run)."""
    if mode == "plain":
        return []
    if how == "sequential":
        size = L // segments  # checkpoint_sequential's own split: the last segment is not checkpointed
        return list(range(0, size * (segments - 1)))
    return list(range(L))  # checkpoint and selective: every block


def run(
    case: Case, out: Output, mode: str, options: dict[str, str], measure: bool = True, steps: int | None = None
) -> dict[str, Any]:
    """TorchAdapter.run (adapter.py): trains `case` (its first `steps`), writes its results through `out`, returns
    the meta fields; `measure`: saved-tensor hooks in step 0 (off in the compared run: case_measure.py)."""
    reentrant = options.get("use_reentrant", "0") == "1"
    preserve = options.get("preserve_rng_state", "1") == "1"
    how = options.get("mode", "checkpoint")
    L = len(case.blocks)
    segments = min(L, int(options.get("segments", max(1, round(math.sqrt(L))))))
    if how == "selective" and reentrant:
        raise BadRequest("mode=selective needs use_reentrant=0 (selective checkpointing is non-reentrant only)")
    if how == "selective" and not HAS_SAC:
        raise BadRequest("mode=selective: this torch has no create_selective_checkpoint_contexts")
    bf16 = case.compute == "bf16"
    MoE.guarded, MoE.attach = options.get("moe_state") == "guarded", options.get("moe_aux") == "attach"
    torch.manual_seed(case.seed)
    counts = [0] * L
    root = build(case, counts)
    root.train()
    model, lm = root.chain, root.lm
    params = list(root.parameters())
    by_name = dict(root.named_parameters())
    buffers = dict(root.named_buffers())
    x0 = torch.from_numpy(case.input.copy()) if case.input is not None else None
    labels = torch.from_numpy(case.labels) if case.labels is not None else None
    target = torch.from_numpy(case.target) if case.target is not None else None
    lr = float(case.lr)
    blocks = list(model)
    moe_blocks = [b for b in blocks if isinstance(b, MoeBlock)]

    recomputed = recomputed_blocks(mode, how, L, segments)

    def forward(x: torch.Tensor | None) -> torch.Tensor:
        if mode == "plain":
            return model(x)
        if how == "sequential":
            return tc.checkpoint_sequential(model, segments, x, use_reentrant=reentrant, preserve_rng_state=preserve)
        for blk in blocks:
            kw = {"use_reentrant": reentrant, "preserve_rng_state": preserve}
            if how == "selective":
                kw["context_fn"] = functools.partial(tc.create_selective_checkpoint_contexts, selective_policy)
            x = tc.checkpoint(blk, x, **kw)
        return x

    def criterion(y: torch.Tensor, mb: MicroBatch) -> torch.Tensor:
        if lm is not None:
            return F.cross_entropy(lm.head(y), labels[mb.rows])
        if labels is not None:
            return F.cross_entropy(y, labels[mb.rows])
        return F.mse_loss(y, target[mb.rows])

    def micro_batch(step: int, m: int) -> tuple[torch.Tensor, Any, int]:
        """One micro-batch's forward and backward: its loss / M accumulated into .grad as a training loop
        does; returns its loss, dL/d(its input rows) or None, and the bytes its forward saved (step 0)."""
        mb = case.micro_batch(step, m)
        x = x0[mb.rows].clone().requires_grad_(case.input_grad) if lm is None else None
        meter = SavedBytes(params) if step == 0 and measure else None
        # Measured in the first step only (every step saves the same tensors), so the hooks' own cost stays
        # out of the later steps, which are the ones `--timing-case` times.
        aux_losses = start_moe_pass(moe_blocks)
        with torch.autograd.graph.saved_tensors_hooks(meter.pack, meter.unpack) if meter else contextlib.nullcontext():
            x_0 = x if lm is None else lm.stem(mb)
            # compute bf16: the chain's forward (and so each checkpoint's recompute, which restores the
            # autocast state it ran under) under CPU autocast; float master weights, the loss in float.
            with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
                y = forward(x_0)
            loss = criterion(y.float() if bf16 else y, mb)
            if mb.count > 1:
                loss = loss / mb.count
            for aux in list(aux_losses):  # block order; each already coef / M times its aux
                loss = loss + aux
        # Under reentrant checkpoint with an input that requires no gradient, the checkpoints' outputs may
        # require none either (transformers issue 21381): then nothing can be differentiated and every
        # gradient is missing, which is reported (missing_grads.json), not a crash.
        if loss.requires_grad:
            loss.backward()
        return loss.detach(), x.grad if x is not None else None, meter.total() if meter else None

    saved, calls, seconds = [], [], []
    for step in range(case.steps if steps is None else min(steps, case.steps)):
        t0 = time.perf_counter()
        for c in range(L):
            counts[c] = 0
        for p in params:
            p.grad = None
        loss, input_grad, step_saved = None, [], 0
        for m in range(case.micro_batches):
            part, grad, nbytes = micro_batch(step, m)
            loss = part if m == 0 else loss + part
            input_grad.append(grad)
            step_saved = max(step_saved, nbytes or 0)  # the largest micro-batch's
        saved.append(step_saved if step == 0 else saved[0])
        compute = time.perf_counter() - t0
        dx = None if any(g is None for g in input_grad) else torch.cat(input_grad).detach().numpy()
        out.step(
            step,
            loss.numpy(),
            {n: grad_or_none(by_name[torch_name(n)]) for n in case.trained_param_names},
            dx,
            {n: buffers[torch_name(n)].detach().numpy() for n in case.state_names},
            torch.get_rng_state().numpy().tobytes(),
        )
        t1 = time.perf_counter()
        with torch.no_grad():
            for p in params:  # frozen parameters and missing gradients: no update, as torch.optim.SGD
                if p.grad is not None:
                    p.sub_(p.grad * lr)
        seconds.append(compute + time.perf_counter() - t1)  # the step, not the writing of its results
        calls.append(list(counts))
    return {
        "saved_activation_bytes": saved if measure else None,
        "forward_calls": calls,
        "recomputed_blocks": recomputed,
        "step_seconds": seconds,
        "segments": segments if how == "sequential" else None,
        "checkpoint_mode": how if mode == "checkpoint" else None,
        "saves_in_checkpoints": mode == "checkpoint" and how == "selective",
    }
