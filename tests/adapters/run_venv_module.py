#!/usr/bin/env python3
"""Runs `python -m MODULE ARGS...` under the Python of the built-in adapters (the venv ci/setup-python fills), for
CTest: run_venv_module.py MODULE [ARGS...] (pytest, ruff). Fails with a hint, or skips (exit 77) when
CKPT_SKIP_FRAMEWORK_TESTS=1, when MODULE is missing, as the framework tests do."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_validate import adapter_python, require_python_modules  # noqa: E402

require_python_modules([sys.argv[1]])
os.execv(adapter_python(), [adapter_python(), "-m"] + sys.argv[1:])
