"""A factory's `distributed` setup (harness/user_model/torch/USER_MODEL.md, "Sharded and data-parallel models"):
FSDP2 (`torch.distributed.fsdp.fully_shard`, through the user's own `shard(model, mesh, mp_policy)`) or
DistributedDataParallel, each rank a process started by torchrun (`python -m torch.distributed.run`), the
launcher users already have, so one validation can span several machines (--nnodes, --rdzv-endpoint).

The driver (user_model.py) is the launcher: it checks the setup, starts torchrun, and reads what the ranks left.
Each rank runs user_model.py's `train` (rank_main here), and rank 0 dumps: the gradients and the parameters after
the step gathered whole from their shards (`DTensor.full_tensor()`), every rank's loss, buffers and generator
state gathered to rank 0 under `NAME@rankR`. Every rank writes ranks/rank<R>.json (its record, or the exception it
raised) and torchrun keeps each rank's stdout and stderr under ranks/log/.

Ranks of another machine join with `user_model.py --join` under their own torchrun (same --nnodes, a --node-rank
of 1 or more, --rdzv-endpoint of node 0) and take the run's arguments from rank 0.
"""

import datetime
import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import torch

KINDS = {
    "fsdp2": {"kind", "world_size", "shard", "mp_policy", "mesh"},
    "ddp": {"kind", "world_size", "find_unused_parameters", "static_graph"},
}
# A rank's own exits (user_model.py's codes): anything else, with no record of its own, is a rank that died.
RANK_EXITS = {2, 4, 5}
SIGTERM_BY_TORCHRUN = -15  # torchrun stops the other ranks when one fails


class LaunchError(Exception):
    """torchrun could not run the ranks (not there, a rendezvous that cannot bind): this machine's limit."""


def check_spec(spec, where, bad):
    """`distributed` of the factory: a dict with a known kind; raises `bad` (BadFactory) with one line."""
    if not isinstance(spec, dict) or spec.get("kind") not in KINDS:
        raise bad("%s: 'distributed' must be a dict with 'kind': one of %s" % (where, ", ".join(sorted(KINDS))))
    kind = spec["kind"]
    unknown = set(spec) - KINDS[kind]
    if unknown:
        raise bad(
            "%s: 'distributed' of kind %s has unknown key(s) %s (known: %s)"
            % (where, kind, ", ".join(sorted(unknown)), ", ".join(sorted(KINDS[kind])))
        )
    w = spec.get("world_size", 2)
    if not isinstance(w, int) or isinstance(w, bool) or w < 1:
        raise bad("%s: 'distributed.world_size' must be an integer of at least 1, not %r" % (where, w))
    if kind == "fsdp2":
        if not callable(spec.get("shard")):
            raise bad(
                "%s: 'distributed' of kind fsdp2 needs 'shard': shard(model, mesh, mp_policy), fully_shard "
                "per block and then the root" % where
            )
        mesh = spec.get("mesh", (w,))
        if not isinstance(mesh, (tuple, list)) or not mesh or not all(isinstance(n, int) and n >= 1 for n in mesh):
            raise bad("%s: 'distributed.mesh' must be a tuple of positive integers, not %r" % (where, mesh))
        if _product(mesh) != w:
            raise bad(
                "%s: 'distributed.mesh' %s has %d ranks, world_size is %d" % (where, tuple(mesh), _product(mesh), w)
            )


def _product(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def world_size(spec):
    return int(spec.get("world_size", 2))


# ---- each rank --------------------------------------------------------------------------------------------------


def parallelize(spec, runner, rank, world):
    """The checkpointed (or plain) model made parallel as the factory says: the user's shard on a CPU mesh, or
    DistributedDataParallel. Runs in every rank, in both runs."""
    if spec["kind"] == "ddp":
        return torch.nn.parallel.DistributedDataParallel(
            runner,
            find_unused_parameters=bool(spec.get("find_unused_parameters", False)),
            static_graph=bool(spec.get("static_graph", False)),
        )
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy

    shape = tuple(spec.get("mesh", (world,)))
    mesh = init_device_mesh("cpu", shape)
    sharded = spec["shard"](runner, mesh, spec.get("mp_policy") or MixedPrecisionPolicy())
    return sharded if sharded is not None else runner


def full(t):
    """A whole tensor from its shards (every rank must call this, in the same order: it is a collective)."""
    if t is None:
        return None
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def shard_rows(params):
    """name -> [rows, rows per rank] of every parameter FSDP2 shards by rows over a 1-D mesh (torch.chunk's
    split: rank R holds rows R*c .. R*c+c-1, the last ranks fewer or none), so a finding in a gathered tensor can
    name the rank whose shard holds its first differing element."""
    from torch.distributed.tensor import DTensor, Shard

    out = {}
    for n, p in params.items():
        if isinstance(p, DTensor) and len(p.placements) == 1 and p.placements[0] == Shard(0) and p.dim() > 0:
            rows, world = p.shape[0], p.device_mesh.size()
            out[n] = [rows, -(-rows // world)]
    return out


def per_rank(value):
    """Every rank's `value` on rank 0 (a list indexed by rank), None elsewhere."""
    import torch.distributed as dist

    out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object(value, out, dst=0)
    return out


def rank_main(argv, run):
    """One rank under torchrun. `run(args, rank, world)` trains and returns the rank's record; rank 0 broadcasts
    the run's arguments (a rank of another node, started with --join, has none of its own)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    rank, world = dist.get_rank(), dist.get_world_size()
    box = [argv if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    args = box[0]
    if args is None:  # rank 0 itself was started with --join: nobody has the run's arguments
        print(
            "user_model.py --join: this node holds rank 0; start node 0 with ckptcheck validate (--node-rank 0 is "
            "its), the other nodes with --node-rank 1 and up",
            file=sys.stderr,
        )
        os._exit(2)
    ranks = os.path.join(args.out, "ranks")
    os.makedirs(ranks, exist_ok=True)
    record, code = run(args, rank, world)
    record["rank"] = rank
    record["time"] = time.time()
    tmp = os.path.join(ranks, ".rank%d.json.tmp" % rank)
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, os.path.join(ranks, "rank%d.json" % rank))
    if code == 0:
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # a failed rank leaves at once: torchrun stops the others, blocked in a collective


# ---- the launcher -----------------------------------------------------------------------------------------------


def launcher():
    """The torchrun command: CKPT_TORCHRUN (a command line, e.g. `torchrun` or a site's wrapper) or this Python's
    torch.distributed.run."""
    text = os.environ.get("CKPT_TORCHRUN", "").strip()
    if text:
        cmd = shlex.split(text)
        if shutil.which(cmd[0]) is None:
            raise LaunchError("torchrun '%s' (CKPT_TORCHRUN) was not found" % cmd[0])
        return cmd
    if not torch.distributed.is_available() or importlib.util.find_spec("torch.distributed.run") is None:
        raise LaunchError("torchrun is not available: this torch %s has no torch.distributed" % torch.__version__)
    return [sys.executable, "-m", "torch.distributed.run"]


def proc_kib(path, field):
    """A "Field: N kB" line of /proc (VmRSS of /proc/self/status, MemAvailable of /proc/meminfo), in bytes."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def check_capacity(local, where, bad):
    """Each rank is a process like this one (torch, the model's imports, the model built): `local` of them must
    fit in the memory this machine has available."""
    need, have = local * proc_kib("/proc/self/status", "VmRSS"), proc_kib("/proc/meminfo", "MemAvailable")
    if have and need > have:
        raise bad(
            "%s: %d ranks on this machine need about %.1f GiB (%d processes of %.0f MiB, as this one); "
            "%.1f GiB is available" % (where, local, need / 2**30, local, need / local / 2**20, have / 2**30)
        )


def command(args, world, script, log_dir):
    """torchrun's command line for this run: one node with --standalone (a free port of its own), or node 0 of
    args.nnodes with a static rendezvous at args.rdzv_endpoint."""
    nodes = max(1, args.nnodes)
    cmd = launcher() + [
        "--nproc-per-node",
        str(world // nodes),
        "--max-restarts",
        "0",
        "--log-dir",
        log_dir,
        "--redirects",
        "3",
        "--monitor-interval",
        "0.2",
    ]
    if nodes == 1 and not args.rdzv_endpoint:
        cmd += ["--standalone"]
    else:
        cmd += [
            "--nnodes",
            str(nodes),
            "--node-rank",
            "0",
            "--rdzv-backend",
            "static",
            "--rdzv-endpoint",
            args.rdzv_endpoint,
        ]
    return cmd + [script, "--rank-worker"] + args.argv


def failures(torchrun_stderr):
    """torchrun's failure summary: {rank: exitcode} of the ranks it saw fail."""
    out = {}
    for rank, code in re.findall(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", torchrun_stderr):
        out[int(rank)] = int(code)
    return out


def last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("*")]
    return lines[-1] if lines else ""


def launch(args, spec, script, meta, where, bad):
    """Runs the ranks and returns rank 0's record; raises RankRaised-like errors through `raised(message)`, `bad`
    for a setup this machine cannot hold, LaunchError when torchrun could not start them."""
    world = world_size(spec)
    nodes = max(1, args.nnodes)
    if world % nodes:
        raise bad("%s: world_size %d is not a multiple of the %d nodes" % (where, world, nodes))
    check_capacity(world // nodes, where, bad)
    meta["world_size"] = world
    meta["nnodes"] = nodes
    ranks = os.path.join(os.path.abspath(args.out), "ranks")
    log_dir = os.path.join(ranks, "log")
    os.makedirs(log_dir, exist_ok=True)
    cmd = command(args, world, script, log_dir)
    with open(os.path.join(ranks, "torchrun.stderr"), "w+") as err:
        code = subprocess.call(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        err.seek(0)
        text = err.read()
    records = {}
    for path in glob.glob(os.path.join(ranks, "rank*.json")):
        with open(path) as f:
            r = json.load(f)
        records[r["rank"]] = r
    meta["ranks"] = [
        {k: records[r].get(k) for k in ("rank", "memory", "saved_activation_bytes", "step_seconds")}
        for r in sorted(records)
    ]
    if code == 0 and 0 in records and "error" not in records[0]:
        return records[0]
    failed = failures(text)
    died = {r: c for r, c in failed.items() if r not in records and c not in RANK_EXITS and c != SIGTERM_BY_TORCHRUN}
    if died:
        r = min(died)
        how = ("signal %d" % -died[r]) if died[r] < 0 else ("exit code %d" % died[r])
        return {
            "error": {"kind": "raised", "message": "rank %d died (%s), its log: %s" % (r, how, log_dir)},
            "phase": "torchrun",
        }
    errors = sorted((rec["time"], r) for r, rec in records.items() if "error" in rec)
    if errors:
        r = errors[0][1]
        rec = records[r]
        rec["error"]["message"] = "rank %d: %s" % (r, rec["error"]["message"])
        return rec
    if not records and not failed:
        raise LaunchError("torchrun could not start the ranks (exit %d): %s" % (code, last_line(text)))
    raise LaunchError("torchrun exit %d, no rank said why: %s" % (code, last_line(text)))
