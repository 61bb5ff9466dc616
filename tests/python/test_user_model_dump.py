"""harness/user_model/torch/user_model.py's `as_numpy`: what the dump holds of a tensor the C++ side cannot read as
it is (bf16, fp16, complex): a float32 array with the same values, bit for bit, and the dtype it came from."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from user_model import as_numpy  # noqa: E402


def test_complex_buffers_are_dumped_as_real_and_imaginary_parts():
    # A RoPE cache as torchtitan's Llama keeps it: complex64 (it stopped validate with "unsupported dtype '<c8'").
    cache = torch.polar(torch.ones(4, 3), torch.arange(12.0).reshape(4, 3))
    entry = {}
    a = as_numpy(cache, entry)
    assert entry["converted_from"] == "complex64"
    assert a.dtype == np.float32 and a.shape == (4, 3, 2)
    assert np.array_equal(a[..., 0].view(np.uint32), cache.real.numpy().view(np.uint32))
    assert np.array_equal(a[..., 1].view(np.uint32), cache.imag.numpy().view(np.uint32))
    # A lazily conjugated view is dumped as its values, not its storage.
    b = as_numpy(cache.conj(), {})
    assert np.array_equal(b[..., 1], -cache.imag.numpy())


def test_real_tensors_are_unchanged_and_bf16_widened_exactly():
    entry = {}
    x = torch.tensor([1.5, -2.25], dtype=torch.bfloat16)
    assert np.array_equal(as_numpy(x, entry), np.array([1.5, -2.25], dtype=np.float32))
    assert entry["converted_from"] == "bfloat16"
    entry = {}
    assert as_numpy(torch.arange(3), entry).dtype == np.int64 and "converted_from" not in entry
