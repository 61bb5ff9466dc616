#!/usr/bin/env python3
"""Runs a Python test script under the Python of the built-in adapters (the one with torch), for CTest:
  run_torch_script.py SCRIPT [ARGS...]
Skips (exit 77) when torch is missing and CKPT_SKIP_FRAMEWORK_TESTS=1, as the other torch tests do."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_validate import adapter_python, require_python_modules  # noqa: E402

require_python_modules(["torch"])
os.execv(adapter_python(), [adapter_python()] + sys.argv[1:])
