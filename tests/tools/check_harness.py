"""What the report's check scripts share (tests/data/report/check_baseline.py, tests/data/costs-report/
check_costs_report.py, tests/tools/report_browser_check.py): every failed check collected and printed, and a scratch
folder removed after the run. `check(cond, what)` records `what` when `cond` is false and returns `cond`."""

import shutil
import tempfile


class Checks:
    def __init__(self, name):
        self.name = name
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)
        return cond

    def run(self, prefix, body):
        """body(scratch folder); then every failure printed, and 0 when none, else 1."""
        tmp = tempfile.mkdtemp(prefix=prefix)
        try:
            body(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        for f in self.failures:
            print("FAILED: " + f)
        print(f"{self.name}: {'ok' if not self.failures else str(len(self.failures)) + ' check(s) failed'}")
        return 0 if not self.failures else 1
