"""The Python API: each function runs the ckptcheck CLI in a child process and reads its report file.

The CLI underneath, not bindings: one engine with one process model (the CLI starts each run of the user's model in
a process of its own, forked from one interpreter, and ends what it started), so a crash, a hang or a leaked
thread of the model's ends that run, never the caller's interpreter or its test session; and the API's verdicts
are the CLI's verdicts, byte for byte the same report.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Optional, TypedDict, Union, Unpack

from . import _cli
from ._factory import Factory, factory_spec
from ._results import PlanResult, ValidateResult

PathLike = Union[str, "os.PathLike[str]"]


class CkptcheckError(RuntimeError):
    """The CLI could not give a verdict: bad input (exit 2) or an adapter fault (exit 3), e.g. the factory raised."""

    def __init__(self, message: str, exit_code: int, output: str):
        super().__init__(message)
        self.exit_code = exit_code
        self.output = output


def _run(args: list[str], timeout: Optional[float]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_cli.binary()), *args],
        env=_cli.environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _error(proc: subprocess.CompletedProcess[str], what: str) -> CkptcheckError:
    lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    why = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "no output")
    return CkptcheckError(
        "ckptcheck %s: exit %d: %s" % (what, proc.returncode, why.strip()), proc.returncode, proc.stdout + proc.stderr
    )


def _out_dir(out: Optional[PathLike]) -> Path:
    if out is None:
        return Path(tempfile.mkdtemp(prefix="ckptcheck-"))
    return Path(out)


class ValidateOptions(TypedDict, total=False):
    """validate's options: the CLI's options of those names, and where and how long it runs."""

    seeds: int  # how many seeds, from `seed` on (default 2)
    steps: int  # training steps per run, optimizer step included (default 2)
    seed: int  # the first seed (default 1)
    batch_size: int  # default: the factory's batch_size
    ulp: int  # accept differences within N ULP (JAX's default 64 on gradients; 0: bitwise only)
    min_saving: float  # the least activation saving the memory property asks (default 0.1)
    shrink: bool  # shrink a finding to the smallest case that still shows it (default True)
    out: PathLike  # the report folder (default: a fresh temporary folder, kept); one run at a time per folder
    timeout: float  # seconds before the CLI is stopped (subprocess.TimeoutExpired)
    extra_args: list[str]  # more CLI arguments


def validate(factory: Factory, framework: str = "torch", **options: Unpack[ValidateOptions]) -> ValidateResult:
    """`ckptcheck validate --adapter FRAMEWORK:module=...` on a factory (a function a module-level name holds, or
    "file.py:name"; harness/user_model/{torch,jax}/USER_MODEL.md say what it returns). Returns the
    verdict, holds or finding, with what it rests on; raises CkptcheckError on bad input or an adapter fault."""
    if framework not in ("torch", "jax"):
        raise ValueError("framework must be torch or jax, not %r" % framework)
    out_dir = _out_dir(options.get("out"))
    args = ["validate", "--adapter", "%s:module=%s" % (framework, factory_spec(factory)), "--out", str(out_dir)]
    args += ["--seeds", str(options.get("seeds", 2)), "--steps", str(options.get("steps", 2))]
    for key, flag in (
        ("seed", "--seed"),
        ("batch_size", "--batch-size"),
        ("ulp", "--ulp"),
        ("min_saving", "--min-saving"),
    ):
        if options.get(key) is not None:
            args += [flag, str(options[key])]  # type: ignore[literal-required]
    if not options.get("shrink", True):
        args.append("--no-shrink")
    proc = _run(args + list(options.get("extra_args", [])), options.get("timeout"))
    report = out_dir / "validate.json"
    if proc.returncode not in (0, 1) or not report.is_file():
        raise _error(proc, "validate")
    return ValidateResult.from_json(json.loads(report.read_text()), proc.stdout, report)


def validate_torch(factory: Factory, **options: Unpack[ValidateOptions]) -> ValidateResult:
    """Validate a PyTorch model's checkpointing: validate(factory, "torch", ...)."""
    return validate(factory, "torch", **options)


def validate_jax(factory: Factory, **options: Unpack[ValidateOptions]) -> ValidateResult:
    """Validate a JAX model's remat: validate(factory, "jax", ...); without `ulp`, JAX's default of 64 ULP of scale
    on the gradients (harness/user_model/jax/USER_MODEL.md)."""
    return validate(factory, "jax", **options)


def profile_torch(
    factory: Factory,
    out: PathLike,
    *,
    batch_size: Optional[int] = None,
    steps: Optional[int] = None,
    seed: Optional[int] = None,
    timeout: Optional[float] = None,
) -> Path:
    """`ckptcheck profile`: measure the factory's `chain` once, plain, into a chain-costs file for `plan`
    (harness/engine/COSTS.md). Returns the file."""
    args = ["profile", "--adapter", "torch:module=%s" % factory_spec(factory), "--out", os.fspath(out)]
    for flag, value in (("--batch-size", batch_size), ("--steps", steps), ("--seed", seed)):
        if value is not None:
            args += [flag, str(value)]
    proc = _run(args, timeout)
    if proc.returncode != 0:
        raise _error(proc, "profile")
    return Path(out)


def plan(
    *,
    costs: Optional[PathLike] = None,
    case: Optional[PathLike] = None,
    policy: Optional[str] = None,
    budget: Optional[int] = None,
    placement: Optional[PathLike] = None,
    timeout: Optional[float] = None,
) -> PlanResult:
    """`ckptcheck plan --json`: a policy's plan on a profiled model (costs=, from profile_torch) or a case file
    (case=, cases/SCHEMA.md). With costs and a budget and no policy: the cheapest policy under the budget;
    placement=: also write the plan as a placement file for `validate --plan`."""
    if (costs is None) == (case is None):
        raise ValueError("plan: give exactly one of costs= and case=")
    args = ["plan", "--json"]
    args += ["--costs", os.fspath(costs)] if costs is not None else ["--case", os.fspath(case)]  # type: ignore[arg-type]
    if policy is not None:
        args += ["--policy", policy]
    if budget is not None:
        args += ["--budget", str(budget)]
    if placement is not None:
        args += ["--placement", os.fspath(placement)]
    proc = _run(args, timeout)
    if proc.returncode != 0:
        raise _error(proc, "plan")
    return PlanResult.from_json(json.loads(proc.stdout))


def assert_checkpoint_equivalent(
    factory: Factory, framework: str = "torch", **options: Unpack[ValidateOptions]
) -> ValidateResult:
    """Raise AssertionError with ckptcheck's finding (module path, ULP, class, replay command) unless the
    checkpointed training equals the plain one and the memory property holds. For a test: pass out=tmp_path
    (pytest's), so each test, under pytest-xdist too, has a folder of its own. seeds defaults to 1 here; the other
    options are validate's. Returns the result when it holds."""
    __tracebackhide__ = True  # pytest shows the assertion, not this frame
    options.setdefault("seeds", 1)
    result = validate(factory, framework, **options)
    if not result.holds:
        raise AssertionError(result.message())
    return result
