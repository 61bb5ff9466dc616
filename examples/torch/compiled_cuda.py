"""The compiled zoo on a GPU: the factories of compiled.py with the model on `cuda` (Inductor's Triton kernels
for the compiled graphs), for `ckptcheck validate --adapter torch:module=examples/torch/compiled_cuda.py:FACTORY`
on a machine with a CUDA device. The batch is drawn from the driver's CPU generator, as on the CPU, and moved to
the device, so both runs see the same batch; dropout then draws from the CUDA generator, whose state the driver
dumps and compares after every step beside the CPU's (user_model.py: every device generator). The driver sets
CUBLAS_WORKSPACE_CONFIG and deterministic algorithms before CUDA starts, and the memory pass reads the step's
peak from torch.cuda's allocator. Pinned in tests/torch_compiled.cmake (labels gpu, compiled); they skip
without a CUDA device."""

import compiled

DEVICE = "cuda"


def _on_cuda(setup):
    """compiled.py's setup with the model and each batch on the GPU (the factory runs after the driver seeds)."""
    setup["model"] = setup["model"].to(DEVICE)
    draw = setup["batch"]
    setup["batch"] = lambda gen, n: tuple(t.to(DEVICE) for t in draw(gen, n))
    return setup


def inductor(seed):
    """compiled.inductor on the GPU: non-reentrant checkpoint with dropout, Inductor (Triton)."""
    return _on_cuda(compiled.inductor(seed))


def eager_backend(seed):
    """compiled.eager_backend on the GPU (PyTorch issue 160773: the recompute redraws dropout)."""
    return _on_cuda(compiled.eager_backend(seed))


def aot_eager(seed):
    """compiled.aot_eager on the GPU."""
    return _on_cuda(compiled.aot_eager(seed))


def sac_save_everything(seed):
    """compiled.sac_save_everything on the GPU: a selective policy that saves every op, a memory finding."""
    return _on_cuda(compiled.sac_save_everything(seed))
