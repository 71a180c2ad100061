"""Which mode Triton launches run in now (activate/on_cpu set it; autotune's timing switches it)."""
from __future__ import annotations

import contextlib

current = {"mode": None, "saved": None}    # the mode; triton's own launch functions while replaced


@contextlib.contextmanager
def native_mode():
    """Launches inside run natively (autotune's timing, autotune.py), whatever the mode."""
    previous = current["mode"]
    current["mode"] = "native"
    try:
        yield
    finally:
        current["mode"] = previous
