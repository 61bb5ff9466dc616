"""Report files written atomically: a temporary file beside the target, renamed into place (as
harness/atomic_file.h does for the C++ side), so a reader never sees half a report."""

from __future__ import annotations

import os
import tempfile

from .report_data import BadInput


def write_atomic(path: str, text: str) -> None:
    """Write `text` (UTF-8, \\n newlines) to a temporary file beside `path` and rename it into place."""
    # As harness/atomic_file.h: the rename would replace a link, a device or a pipe, not write through it.
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        raise BadInput(f"cannot write '{path}': not a regular file (it would be replaced, not written to)")
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
