"""Specialisation: bind Const parameters and fold compile-time constants.

Like torch.compile(dynamic=False), a kernel is compiled per constant set. The
result has no Const parameters; loop steps and private sizes are literals.
Folding applies each operation's registry `lanes` function, the interpreter's
own, so it never changes a bit.
"""
from __future__ import annotations

import numpy as np

from .errors import KernelError
from .ir import (
    I32_MAX,
    I32_MIN,
    DType,
    Expr,
    Kernel,
    Op,
    ParamKind,
    const,
    map_stmts,
)
from .opdefs import OPDEFS
from .semantics import LaneError
from .spec import validate


def fold(e: Expr, binding: dict, block: int, memo: dict) -> Expr:
    r = memo.get(id(e))
    if r is not None:
        return r
    if e.op is Op.PARAM and e.arg in binding:
        r = const(binding[e.arg], e.dtype)
    elif e.op is Op.BLOCK_SIZE:
        r = const(block, DType.I32)
    elif not e.src:
        r = e
    else:
        src = tuple(fold(s, binding, block, memo) for s in e.src)
        r = e if all(a is b for a, b in zip(src, e.src)) else Expr(e.op, e.dtype, src, e.arg)
        if OPDEFS[e.op].lanes is not None and all(s.op is Op.CONST for s in src):
            r = _fold_node(r)   # a function of its operands' values alone, all of them known
        elif e.op is Op.SELECT and src[0].op is Op.CONST:
            r = src[1] if src[0].arg else src[2]
    memo[id(e)] = r
    return r


def _fold_node(e: Expr) -> Expr:
    vals = [np.asarray(s.arg, s.dtype.np)[()] for s in e.src]
    try:
        with np.errstate(all="ignore"):
            v = OPDEFS[e.op].lanes(e, vals, True)
    except LaneError:
        return e  # e.g. a constant division by zero: left for the run time to report
    return Expr(Op.CONST, e.dtype, (), np.asarray(v).item())


def specialize(kernel: Kernel, consts: dict) -> Kernel:
    """Bind `consts` (name -> int) and fold; validates before and after."""
    wanted = {p.name for p in kernel.const_params}
    given = set(consts)
    if kernel.specialised:
        if given:
            raise KernelError(kernel.name, None, f"already specialised; unexpected constants {sorted(given)}")
        return kernel
    if given - wanted:
        raise KernelError(kernel.name, None, f"unknown constant(s) {sorted(given - wanted)}; "
                                             f"the kernel's constants are {sorted(wanted) or 'none'}")
    if wanted - given:
        raise KernelError(kernel.name, None, f"missing constant(s) {sorted(wanted - given)}")
    binding = {}
    for name, v in consts.items():
        if isinstance(v, bool) or not isinstance(v, (int,)) and not hasattr(v, "__index__"):
            raise KernelError(kernel.name, None, f"constant {name} must be an int, got {v!r}")
        v = int(v)
        if not I32_MIN <= v <= I32_MAX:
            raise KernelError(kernel.name, None, f"constant {name}={v} does not fit in i32")
        binding[name] = v
    validate(kernel)
    memo: dict = {}
    body = map_stmts(kernel.body, lambda e: fold(e, binding, kernel.block, memo))
    params = tuple(p for p in kernel.params if p.kind is not ParamKind.CONST)
    k = Kernel(kernel.name, params, body, kernel.block, tuple(sorted(binding.items())), specialised=True)
    validate(k, specialised=True)
    return k
