"""What the user-model drivers share (harness/user_model/torch/user_model.py, harness/user_model/jax/user_model.py):
loading the user's factory, the error for a broken contract, and the dump the C++ side compares
(harness/user_model/user_model_run.h): .npy files under step<N>/<kind>/ (init/ before training) listed, in
comparison order, in index.json, written atomically."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np


def run_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments every driver run takes (harness/user_model/user_model_run.cpp passes them); a driver adds its
    own."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--module", required=True)
    ap.add_argument("--factory", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--mode", choices=["plain", "checkpoint"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch-size", type=int, default=0)
    ap.add_argument("--zero-batch", action="store_true", help="floating tensors of every batch set to zero")
    return ap


class BadFactory(Exception):
    """The user's module or factory breaks the contract (not an exception raised by their code)."""


def one_line(text: Any) -> str:
    """The text's words on one line, at most 400 characters (an exception's message in a report field)."""
    return " ".join(str(text).split())[:400]


def load_factory(path: str, name: str) -> Callable[..., Any]:
    """The function `name` of the user's module file `path`, imported; BadFactory when either is missing."""
    if not os.path.isfile(path):
        raise BadFactory("module file '%s' does not exist" % path)
    spec = importlib.util.spec_from_file_location("ckpt_user_model", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)  # an exception here is the user's code raising: phase "import"
    factory = getattr(module, name, None)
    if factory is None or not callable(factory):
        raise BadFactory("'%s' has no function '%s'" % (path, name))
    return factory


class Dump:
    """Writes arrays as .npy and lists them, in comparison order. `convert(value, entry)` turns a framework's
    tensor into a numpy array the C++ reads (float32/64, int32/64, uint8, bool), noting a conversion in `entry`."""

    def __init__(self, out: str, convert: Callable[[Any, dict[str, Any]], Any] | None = None) -> None:
        self.out = out
        self.convert = convert or (lambda value, entry: value)
        self.tensors = []
        os.makedirs(out, exist_ok=True)

    def tensor(self, step: int, kind: str, name: str, value: Any) -> None:
        """Save `value` as OUT/step<N>/<kind>/<name>.npy (OUT/init/... for step -1) and list it; None is listed
        without a file."""
        entry = {"step": step, "kind": kind, "name": name, "file": None}
        if value is not None:
            a = np.ascontiguousarray(self.convert(value, entry))
            rel = os.path.join("step%d" % step if step >= 0 else "init", kind, name + ".npy")
            os.makedirs(os.path.dirname(os.path.join(self.out, rel)), exist_ok=True)
            np.save(os.path.join(self.out, rel), a)
            entry["file"] = rel
        self.tensors.append(entry)


def write_index(out: str, meta: dict[str, Any], tensors: list[dict[str, Any]]) -> None:
    """index.json: the run's record and its tensors, atomically (the harness reads it whatever happened)."""
    meta["tensors"] = tensors
    tmp = os.path.join(out, ".index.json.tmp")
    with open(tmp, "w") as f:
        json.dump(meta, f, indent=1)
    os.replace(tmp, os.path.join(out, "index.json"))
