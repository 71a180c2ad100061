"""Generated kernels as Python source, run through the frontend.

`kernel_source(k)` prints a kernel as `@kernel` Python source that the frontend
(`refimpl.frontend`) turns back into *the same IR*, node for node, not only the
same meaning (`refimpl.printer` aims at readability: weakly typed literals,
minimal parentheses). Literals are typed (`f32(1.5)`, `i32(-3)`, `u32(7)`,
`f32(-0.0)`, `f32(NAN)`), every operation is parenthesised, `range` always
gets three arguments. Two IR forms have no source spelling and are normalised
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
import math as _math
import struct

from ...refimpl.ir import (Assign, Collective, DType, Expr, For, If, Kernel, Op, ParamKind, Private, PStore,
                           Store, binary, const)

_SYM = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.MOD: "%", Op.AND: "&", Op.OR: "|", Op.XOR: "^",
        Op.SHL: "<<", Op.SHR: ">>", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=", Op.EQ: "==",
        Op.NE: "!="}
_CALL0 = {Op.THREAD_ID: "thread_id", Op.BLOCK_ID: "block_id", Op.GLOBAL_ID: "global_id",
          Op.BLOCK_SIZE: "block_size", Op.NUM_THREADS: "num_threads"}
_TYPE = {DType.F32: "f32", DType.I32: "i32", DType.U32: "u32", DType.BOOL: "bool"}
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

    def st(s):
        if isinstance(s, Assign):
            return Assign(s.name, ex(s.value), s.loc)
        if isinstance(s, Store):
            return Store(s.buf, ex(s.index), ex(s.value), s.loc)
        if isinstance(s, PStore):
            return PStore(s.arr, ex(s.index), ex(s.value), s.loc)
        if isinstance(s, Private):
            return Private(s.name, s.dtype, ex(s.size), s.loc)
        if isinstance(s, Collective):
            return Collective(s.name, s.op, ex(s.value), s.loc)
        if isinstance(s, If):
            return If(ex(s.cond), tuple(map(st, s.then)), tuple(map(st, s.orelse)), s.loc)
        return For(s.var, ex(s.start), ex(s.stop), ex(s.step), tuple(map(st, s.body)), s.loc)

    return Kernel(k.name, k.params, tuple(map(st, k.body)), k.block, k.consts, k.specialised)


# ---------------------------------------------------------------- printing

def _literal(e: Expr) -> str:
    v, dt = e.arg, e.dtype
    if dt is DType.BOOL:
        return repr(bool(v))
    if dt is DType.F32:
        if v != v:
            return "f32(NAN)"
        if _math.isinf(v):
            return "f32(INF)" if v > 0 else "f32(-INF)"
        return f"f32({float(v)!r})"
    return f"{dt.value}({int(v)})"


def expr_source(e: Expr) -> str:
    op = e.op
    if op is Op.CONST:
        return _literal(e)
    if op in (Op.VAR, Op.PARAM):
        return e.arg
    if op in _CALL0:
        return f"{_CALL0[op]}()"
    if op is Op.BUFLEN:
        return f"len({e.arg})"
    if op in (Op.LOAD, Op.PLOAD):
        return f"{e.arg}[{expr_source(e.src[0])}]"
    if op is Op.MATH:
        return f"{e.arg}({expr_source(e.src[0])})"
    if op in (Op.SQRT, Op.ABS):
        return f"{op.name.lower()}({expr_source(e.src[0])})"
    if op in (Op.MIN, Op.MAX, Op.FMA):
        return f"{op.name.lower()}({', '.join(expr_source(s) for s in e.src)})"
    if op is Op.CAST:
        if e.dtype is DType.BOOL:
            raise ValueError("a conversion to bool has no source spelling: normalise() first")
        return f"{e.dtype.value}({expr_source(e.src[0])})"
    if op is Op.BITCAST:
        return f"bitcast({expr_source(e.src[0])}, {e.dtype.value})"
    if op is Op.NEG:
        return f"(-{expr_source(e.src[0])})"
    if op is Op.NOT:
        return f"(not {expr_source(e.src[0])})" if e.dtype is DType.BOOL else f"(~{expr_source(e.src[0])})"
    if op is Op.SELECT:
        c, a, b = (expr_source(s) for s in e.src)
        return f"({a} if {c} else {b})"
    if op is Op.DIV:
        sym = "/" if e.dtype is DType.F32 else "//"
    elif op in _SYM:
        sym = _SYM[op]
    else:
        raise ValueError(f"no source spelling for {op.name}")
    return f"({expr_source(e.src[0])} {sym} {expr_source(e.src[1])})"


def _stmts(body, indent: int) -> list:
    pad = "    " * indent
    out = []
    for s in body:
        if isinstance(s, Assign):
            out.append(f"{pad}{s.name} = {expr_source(s.value)}")
        elif isinstance(s, Store):
            out.append(f"{pad}{s.buf}[{expr_source(s.index)}] = {expr_source(s.value)}")
        elif isinstance(s, PStore):
            out.append(f"{pad}{s.arr}[{expr_source(s.index)}] = {expr_source(s.value)}")
        elif isinstance(s, Private):
            out.append(f"{pad}{s.name} = private({_TYPE[s.dtype]}, {expr_source(s.size)})")
        elif isinstance(s, Collective):
            out.append(f"{pad}{s.name} = {s.op.value}({expr_source(s.value)})")
        elif isinstance(s, If):
            out.append(f"{pad}if {expr_source(s.cond)}:")
            out.extend(_stmts(s.then, indent + 1) or [f"{pad}    pass"])
            if s.orelse:
                out.append(f"{pad}else:")
                out.extend(_stmts(s.orelse, indent + 1))
        elif isinstance(s, For):
            out.append(f"{pad}for {s.var} in range({expr_source(s.start)}, {expr_source(s.stop)}, "
                       f"{expr_source(s.step)}):")
            out.extend(_stmts(s.body, indent + 1) or [f"{pad}    pass"])
        else:
            raise TypeError(f"not a statement: {s!r}")
    return out


def _param(p) -> str:
    if p.kind is ParamKind.BUFFER:
        return f"{p.name}: Buffer[{_TYPE[p.dtype]}]"
    if p.kind is ParamKind.CONST:
        return f"{p.name}: Const[int]"
    return f"{p.name}: {p.dtype.value}"


def kernel_source(k: Kernel) -> str:
    """`@kernel` source of a (normalised) kernel; the frontend gives back its IR."""
    if k.specialised:
        raise ValueError("a specialised kernel has no source (its Const parameters are bound)")
    head = [f"@kernel(block={k.block})", f"def {k.name}({', '.join(_param(p) for p in k.params)}):"]
    return "\n".join(head + (_stmts(k.body, 1) or ["    pass"])) + "\n"


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


def _stext(body, out: list, depth: int):
    for s in body:
        pad = " " * depth
        if isinstance(s, Assign):
            out.append(f"{pad}assign {s.name} {_etext(s.value)}")
        elif isinstance(s, Store):
            out.append(f"{pad}store {s.buf} {_etext(s.index)} {_etext(s.value)}")
        elif isinstance(s, PStore):
            out.append(f"{pad}pstore {s.arr} {_etext(s.index)} {_etext(s.value)}")
        elif isinstance(s, Private):
            out.append(f"{pad}private {s.name} {s.dtype.value} {_etext(s.size)}")
        elif isinstance(s, Collective):
            out.append(f"{pad}collective {s.name} {s.op.value} {_etext(s.value)}")
        elif isinstance(s, If):
            out.append(f"{pad}if {_etext(s.cond)}")
            _stext(s.then, out, depth + 1)
            out.append(f"{pad}else")
            _stext(s.orelse, out, depth + 1)
        else:
            out.append(f"{pad}for {s.var} {_etext(s.start)} {_etext(s.stop)} {_etext(s.step)}")
            _stext(s.body, out, depth + 1)


def ir_text(k: Kernel) -> list:
    """The kernel as lines of text: every node in full (no sharing), literal bits
    exact, no source locations. Equal texts, identical kernels."""
    out = [f"kernel {k.name} block={k.block} consts={k.consts} specialised={k.specialised}"]
    out += [f"param {p.name} {p.kind.name} {p.dtype.value}" for p in k.params]
    _stext(k.body, out, 0)
    return out


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
