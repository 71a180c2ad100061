"""Errors that name the kernel and the statement they concern."""
from __future__ import annotations


class KernelError(Exception):
    """A kernel is not valid (frontend, validator, specialisation, launch checks)."""

    def __init__(self, kernel: str, loc, message: str):
        self.kernel, self.loc, self.message = kernel, loc, message
        where = f", {loc}" if loc is not None and str(loc) != "statement" else ""
        super().__init__(f"kernel {kernel}{where}: {message}")
