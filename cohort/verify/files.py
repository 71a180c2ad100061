"""Writing files so that a failure leaves nothing partial and names its path (issue 28).

A full disk, a quota, a read-only file system or a missing permission is the
user's environment, not a bug: the CLI turns such an OSError into one line (exit
2) naming the resource and the path. The path comes from the exception's
`filename`, which a failed `write` does not set: the writers here set it. numpy's
`tofile` (which `np.save` uses on real files) reports a short write without its
errno ("16384 requested and 4064 written"): `save_npy` writes through Python's
file object instead, so the errno survives.
"""
from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def naming(path: str):
    """An OSError raised inside without a path gets `path` (what the user asked to write)."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            e.filename = path
        raise


def write_atomic(path: str, write, mode: str = "w") -> None:
    """`write(f)` into a temporary file next to `path`, fsync'ed, then renamed onto it.
    On any failure (or Ctrl-C) the temporary file is removed and `path` is untouched."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with naming(path):
            with open(tmp, mode) as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class _Writer:
    """Not a real file to numpy: it writes chunk by chunk through `write`, keeping the errno."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        return self.f.write(data)


def save_npy(path: str, array) -> None:
    import numpy as np
    with naming(path), open(path, "wb") as f:
        np.save(_Writer(f), array)
        f.flush()
