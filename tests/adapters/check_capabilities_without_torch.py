#!/usr/bin/env python3
"""The torch adapter answers `capabilities` without importing torch (importing it costs two seconds, paid by every
validate): with a torch that raises on import first on PYTHONPATH (tests/adapters/no-torch/), the query still
exits 0 with the installed torch's version, while `import torch` under the same PYTHONPATH fails. Run under the
adapters' Python with torch installed (run_torch_script.py)."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTER = os.path.join(HERE, "..", "..", "harness", "adapters", "torch", "adapter.py")
env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "no-torch"))
caps = subprocess.run([sys.executable, ADAPTER, "capabilities"], capture_output=True, text=True, env=env)
if caps.returncode != 0:
    sys.exit("FAIL: capabilities exited %d: %s" % (caps.returncode, caps.stderr.strip()[-300:]))
c = json.loads(caps.stdout)
import importlib.metadata  # noqa: E402

want = importlib.metadata.version("torch")
if c.get("framework") != "torch" or c.get("torch_full_version") != want or c.get("version") != want.split("+")[0]:
    sys.exit("FAIL: capabilities named %r %r, the installed torch is %s" % (c.get("framework"), c.get("version"), want))
if "selective" not in c["options"]["mode"]["values"]:
    sys.exit("FAIL: capabilities lost mode=selective")
# The poison works: importing torch under the same environment fails with its message (the check is not vacuous).
imp = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=env)
if imp.returncode == 0 or "imported torch" not in imp.stderr:
    sys.exit("FAIL: the poisoned torch was not the one imported (exit %d): %s" % (imp.returncode, imp.stderr[-300:]))
print("capabilities without torch: ok (torch %s)" % want)
