"""The libdevice functions kernels import, from both of triton's module paths."""
from __future__ import annotations

import importlib
import inspect


def functions():
    """(function object, name) for every public function of triton.language.extra.libdevice
    and triton.language.extra.cuda.libdevice."""
    out = []
    for modname in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice"):
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        for name, fn in vars(mod).items():
            if not name.startswith("_") and callable(fn) and not inspect.isclass(fn) \
                    and getattr(fn, "__module__", "").startswith("triton.language"):
                out.append((fn, name))
    return out
