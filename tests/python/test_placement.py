"""harness/user_model/torch/placement.py: the probe counts each named module's forward calls, keeps the stack of
running modules for every packed tensor, records each module's first inputs (parameters excluded)."""

import pytest

torch = pytest.importorskip("torch")
from placement import PlacementProbe, traced  # noqa: E402


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()))


def test_calls_stack_and_inputs():
    m = model()
    params = {p.untyped_storage().data_ptr() for p in m.parameters()}
    probe = PlacementProbe(list(m.named_modules()), params)
    seen = []
    orig = probe.packed

    def packed(ptr, nbytes):
        seen.append(tuple(probe.stack))
        orig(ptr, nbytes)

    x = torch.randn(3, 4)
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: packed(t.untyped_storage().data_ptr(), t.nbytes) or t, lambda t: t
    ):
        m(x).sum().backward()
        m[1](x)  # a second call of the inner block only
    probe.remove()
    meta = probe.meta()
    assert meta["forward_calls"] == {"0": 1, "1": 2, "1.0": 2, "1.1": 2}
    assert probe.stack == []  # every forward popped its name
    assert ("1", "1.0") in seen and ("0",) in seen  # packed under the modules running then
    assert meta["module_inputs"]["0"] == [[x.untyped_storage().data_ptr(), x.untyped_storage().nbytes()]]
    assert all(p not in params for entries in meta["module_inputs"].values() for p, _ in entries)
    assert all(isinstance(stack, list) for _, _, stack in meta["pack_events"])
    assert not traced(m) and probe.keep == []


def test_a_raising_forward_still_pops_its_name():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4))
    probe = PlacementProbe(list(m.named_modules()), set())
    with pytest.raises(RuntimeError):
        m(torch.randn(3, 5))  # wrong width: Linear raises inside its forward
    assert probe.stack == [] and probe.calls == {"0": 1}
    probe.remove()
    m(torch.randn(3, 4))
    assert probe.calls == {"0": 1}  # removed: no longer counted
