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
from typing import Optional, Union

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


def _validate(
    framework: str,
    factory: Factory,
    *,
    seeds: int,
    steps: int,
    seed: Optional[int],
    batch_size: Optional[int],
    ulp: Optional[int],
    min_saving: Optional[float],
    shrink: bool,
    out: Optional[PathLike],
    timeout: Optional[float],
    extra: list[str],
) -> ValidateResult:
    out_dir = _out_dir(out)
    args = [
        "validate",
        "--adapter",
        "%s:module=%s" % (framework, factory_spec(factory)),
        "--seeds",
        str(seeds),
        "--steps",
        str(steps),
        "--out",
        str(out_dir),
    ]
    if seed is not None:
        args += ["--seed", str(seed)]
    if batch_size is not None:
        args += ["--batch-size", str(batch_size)]
    if ulp is not None:
        args += ["--ulp", str(ulp)]
    if min_saving is not None:
        args += ["--min-saving", str(min_saving)]
    if not shrink:
        args.append("--no-shrink")
    proc = _run(args + extra, timeout)
    report = out_dir / "validate.json"
    if proc.returncode not in (0, 1) or not report.is_file():
        raise _error(proc, "validate")
    return ValidateResult.from_json(json.loads(report.read_text()), proc.stdout, report)


def validate_torch(
    factory: Factory,
    *,
    seeds: int = 2,
    steps: int = 2,
    seed: Optional[int] = None,
    batch_size: Optional[int] = None,
    ulp: Optional[int] = None,
    min_saving: Optional[float] = None,
    shrink: bool = True,
    out: Optional[PathLike] = None,
    timeout: Optional[float] = None,
    extra_args: Optional[list[str]] = None,
) -> ValidateResult:
    """Validate a PyTorch model's checkpointing: `ckptcheck validate --adapter torch:module=...`.

    factory: a module-level function `factory(seed) -> dict` (harness/adapters/torch/USER_MODEL.md, "The factory"),
    or "file.py:name". seeds, steps, seed, batch_size, ulp, min_saving, shrink: the CLI's options of those names.
    out: the report folder (default: a fresh temporary folder, kept, named in the result's `report`); one run at a
    time per folder. timeout: seconds before the CLI is stopped (subprocess.TimeoutExpired). extra_args: more CLI
    arguments. Returns the verdict (holds or finding); raises CkptcheckError on bad input or an adapter fault.
    """
    return _validate(
        "torch",
        factory,
        seeds=seeds,
        steps=steps,
        seed=seed,
        batch_size=batch_size,
        ulp=ulp,
        min_saving=min_saving,
        shrink=shrink,
        out=out,
        timeout=timeout,
        extra=extra_args or [],
    )


def validate_jax(
    factory: Factory,
    *,
    seeds: int = 2,
    steps: int = 2,
    seed: Optional[int] = None,
    batch_size: Optional[int] = None,
    ulp: Optional[int] = None,
    min_saving: Optional[float] = None,
    shrink: bool = True,
    out: Optional[PathLike] = None,
    timeout: Optional[float] = None,
    extra_args: Optional[list[str]] = None,
) -> ValidateResult:
    """Validate a JAX model's remat: `ckptcheck validate --adapter jax:module=...` (harness/adapters/jax/USER_MODEL.md).
    The arguments are validate_torch's; ulp=None keeps the JAX default (64 ULP of scale on gradients, ulp=0:
    bitwise only)."""
    return _validate(
        "jax",
        factory,
        seeds=seeds,
        steps=steps,
        seed=seed,
        batch_size=batch_size,
        ulp=ulp,
        min_saving=min_saving,
        shrink=shrink,
        out=out,
        timeout=timeout,
        extra=extra_args or [],
    )


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
    factory: Factory,
    *,
    framework: str = "torch",
    seeds: int = 1,
    steps: int = 2,
    out: Optional[PathLike] = None,
    **options: object,
) -> ValidateResult:
    """Raise AssertionError with ckptcheck's finding (module path, ULP, class, replay command) unless the
    checkpointed training equals the plain one and the memory property holds. For a test: pass out=tmp_path
    (pytest's), so each test, under pytest-xdist too, has a folder of its own. framework: torch or jax; the other
    options are validate_torch's. Returns the result when it holds."""
    __tracebackhide__ = True  # pytest shows the assertion, not this frame
    run = {"torch": validate_torch, "jax": validate_jax}.get(framework)
    if run is None:
        raise ValueError("framework must be torch or jax, not %r" % framework)
    result = run(factory, seeds=seeds, steps=steps, out=out, **options)  # type: ignore[arg-type]
    if not result.holds:
        raise AssertionError(result.message())
    return result
