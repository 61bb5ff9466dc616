#!/usr/bin/env python3
"""The torch adapter with one deliberate fault, for validate's memory property (check 3 against the plan,
harness/validate/saved_bytes_plan.h):
  faulty_torch_adapter.py FAULT <protocol arguments...>
FAULT:
  no-op-checkpoint        torch.utils.checkpoint.checkpoint replaced by a direct call of the block: bitwise
                          equal, forward calls as declared (a recomputed block runs at least once), but the
                          checkpointed run keeps every activation  -> finding: no effect on saved activations
  every-other-checkpoint  the odd blocks called directly, though every block is declared recomputed: bitwise
                          equal, forward calls as declared, saves less than plain but far more than the plan of
                          checkpointing every block allows         -> finding: above the planned bytes
  hooks-draw              the saved-tensor hooks of the measuring pass (case_measure.py) draw from the CPU
                          generator as they pack: the pass's run differs from the compared one, so its bytes
                          are dropped and the report says which run's pass changed it; the verdict is the
                          compared runs' (they carry no hook)      -> holds, the change reported
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness", "adapters", "torch"))
import adapter  # noqa: E402  (harness/adapters/torch/adapter.py)
import case_model as tad  # noqa: E402  (its model and training loop, harness/adapters/torch/case_model.py)
from ckpt_adapter import main  # noqa: E402

FAULT = sys.argv.pop(1)
real_checkpoint = tad.tc.checkpoint

if FAULT == "no-op-checkpoint":
    tad.tc.checkpoint = lambda fn, *args, **kwargs: fn(*args)
elif FAULT == "every-other-checkpoint":

    def every_other(block, x, **kwargs):
        return real_checkpoint(block, x, **kwargs) if block._index % 2 == 0 else block(x)

    tad.tc.checkpoint = every_other
elif FAULT == "hooks-draw":

    class DrawingSavedBytes(tad.SavedBytes):
        def pack(self, t):
            tad.torch.rand(1)
            return super().pack(t)

    tad.SavedBytes = DrawingSavedBytes
else:
    sys.exit("faulty_torch_adapter.py: unknown fault " + FAULT)

if __name__ == "__main__":
    main(adapter.TorchAdapter)
