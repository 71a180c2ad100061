"""Errors that name the kernel and the statement they concern."""
from __future__ import annotations


class KernelError(Exception):
    """A kernel is not valid (frontend, validator, specialisation, launch checks)."""

    def __init__(self, kernel: str, loc, message: str):
        self.kernel, self.loc, self.message = kernel, loc, message
        where = f", {loc}" if loc is not None and str(loc) != "statement" else ""
        super().__init__(f"kernel {kernel}{where}: {message}")


def source_lines(fn) -> tuple:
    """(lines, first line number) of a kernel function's source, which the frontend parses.
    Python keeps none for a function typed at the plain interactive prompt or made by exec of
    a string: a KernelError saying so, not inspect's `OSError: could not get source code`."""
    import inspect
    try:
        return inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise KernelError(fn.__name__, None, f"@kernel parses the Python source of {fn.__name__}(), and Python "
                          f"has none for it (defined at the interactive prompt or by exec: "
                          f"{fn.__code__.co_filename}); put the kernel in a .py file and import it (IPython "
                          "and Jupyter keep cell sources: they work too)") from None
