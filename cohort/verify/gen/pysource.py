"""Generated kernels as Python source, run through the frontend.

`kernel_source(k)` prints a kernel as `@kernel` Python source that the frontend
(`refimpl.frontend`) turns back into *the same IR*, node for node, not only the
same meaning. It is the printer's `exact` style (refimpl/printer.py; its
default style aims at readability): literals are typed (`f32(1.5)`, `i32(-3)`,
`u32(7)`, `f32(-0.0)`, `f32(NAN)`), every operation is parenthesised, `range`
always gets three arguments. Two IR forms have no source spelling and are normalised
first (`normalise`), with the same meaning: a conversion to bool is `x != 0`
(DESIGN §3: NaN is true, -0.0 false), and a NaN literal is the canonical NaN (a
NaN's payload is unspecified). Sharing of expression nodes is not kept (the
frontend builds a tree), so IR is compared as text of the tree (`ir_text`).

`source_round_trip(k)` prints, parses with the frontend and compares: it gives
(source, the frontend's kernel, None) or, when the frontend's IR differs, a
description of the first difference instead of None.
"""
from __future__ import annotations

import itertools
import linecache
import struct

from ...refimpl.ir import (
    DType,
    Expr,
    Field,
    Kernel,
    Op,
    binary,
    const,
    map_stmts,
    stmt_def,
)
from ...refimpl.printer import format_expr, format_kernel, statement_lines

_files = itertools.count()


# ---------------------------------------------------------------- normalising

def normalise(k: Kernel) -> Kernel:
    """The same kernel with cast-to-bool as `x != 0` and NaN literals canonical."""
    memo: dict = {}

    def ex(e: Expr) -> Expr:
        r = memo.get(id(e))
        if r is not None:
            return r
        src = tuple(ex(s) for s in e.src)
        if e.op is Op.CAST and e.dtype is DType.BOOL:
            r = binary(Op.NE, src[0], const(0, src[0].dtype))
        elif e.op is Op.CONST and e.dtype is DType.F32 and e.arg != e.arg:
            r = const(float("nan"), DType.F32)
        elif src == e.src:
            r = e
        else:
            r = Expr(e.op, e.dtype, src, e.arg)
        memo[id(e)] = r
        return r

    return Kernel(k.name, k.params, map_stmts(k.body, ex), k.block, k.consts, k.specialised)


# ---------------------------------------------------------------- printing

def expr_source(e: Expr) -> str:
    """The printer's exact style: typed literals, every operation parenthesised."""
    return format_expr(e, exact=True)


def kernel_source(k: Kernel) -> str:
    """`@kernel` source of a (normalised) kernel; the frontend gives back its IR."""
    if k.specialised:
        raise ValueError("a specialised kernel has no source (its Const parameters are bound)")
    return format_kernel(k, exact=True) + "\n"


# ---------------------------------------------------------------- parsing

def parse_source(text: str, name: str) -> Kernel:
    """The frontend's IR of kernel `name` in `text` (source with `from cohort import *`
    in scope). The text is registered with linecache while the frontend reads it."""
    module = "from cohort import *\n\n\n" + text
    filename = f"<cohort-generated-{next(_files)}>"
    linecache.cache[filename] = (len(module), None, module.splitlines(True), filename)
    try:
        namespace = {"__name__": "cohort_generated"}
        exec(compile(module, filename, "exec"), namespace)
        return namespace[name].ir
    finally:
        linecache.cache.pop(filename, None)


# ---------------------------------------------------------------- comparing

def _bits(v: float) -> str:
    return f"{struct.unpack('<I', struct.pack('<f', v))[0]:08x}"


def _etext(e: Expr) -> str:
    arg = e.arg
    if e.op is Op.CONST and e.dtype is DType.F32:
        arg = "nan" if arg != arg else _bits(arg)
    inner = " ".join(_etext(s) for s in e.src)
    return f"({e.op.name}:{e.dtype.value}:{arg}{' ' + inner if inner else ''})"


def _sline(s) -> str:
    """One statement's own line: its tag, then every field but its bodies, every
    expression node in full."""
    d = stmt_def(s)
    parts = [d.tag]
    for f, kind, _ in d.fields:
        v = getattr(s, f)
        if kind is Field.EXPR:
            parts.append(_etext(v))
        elif kind in (Field.DTYPE, Field.ENUM):
            parts.append(v.value)
        elif kind is Field.NAME:
            parts.append(v)
    return " ".join(parts)


def ir_text(k: Kernel) -> list:
    """The kernel as lines of text: every node in full (no sharing), literal bits
    exact, no source locations. Equal texts, identical kernels."""
    out = [f"kernel {k.name} block={k.block} consts={k.consts} specialised={k.specialised}"]
    out += [f"param {p.name} {p.kind.name} {p.dtype.value}" for p in k.params]
    return out + statement_lines(k.body, _sline, 0, pad=" ")


def source_round_trip(k: Kernel):
    """(source, frontend kernel, None if its IR is the normalised kernel's else the
    first differing line). A frontend error is a difference too (kernel None)."""
    from ...refimpl.errors import KernelError
    norm = normalise(k)
    text = kernel_source(norm)
    try:
        k2 = parse_source(text, k.name)
    except (KernelError, SyntaxError) as e:
        return text, None, f"the frontend rejects the printed source: {type(e).__name__}: {e}"
    a, b = ir_text(norm), ir_text(k2)
    if a == b:
        return text, k2, None
    i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return text, k2, (f"line {i}: generated {a[i] if i < len(a) else '<end>'!r:.300} vs frontend "
                      f"{b[i] if i < len(b) else '<end>'!r:.300}")
