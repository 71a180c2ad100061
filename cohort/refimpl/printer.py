"""A readable printer. Its output is valid frontend source: printing a kernel
and parsing the text again gives a kernel with the same meaning (shared
subexpressions are printed once per use). How each operation is written is its
registry record's `spelling` (opdefs.py); this file implements each form once."""
from __future__ import annotations

import math

from .ir import Assign, Collective, DType, Expr, For, If, Kernel, ParamKind, Private, PStore, Store
from .opdefs import OPDEFS


def _literal(v, dt: DType) -> str:
    if dt is DType.F32:
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INF" if v > 0 else "-INF"
        return repr(float(v))
    if dt is DType.BOOL:
        return repr(bool(v))
    return repr(int(v)) if dt is DType.I32 else f"u32({int(v)})"


def format_expr(e: Expr, prec: int = 0) -> str:
    """`e` as source, parenthesised where an operator binding at `prec` needs it."""
    d = OPDEFS[e.op]
    sp = d.spelling_for(e)
    return _FORMS[sp.form](e, sp, prec)


def _form_literal(e, sp, prec):
    s = _literal(e.arg, e.dtype)
    return f"({s})" if s.startswith("-") and prec > 13 else s


def _form_call(e, sp, prec):
    # `len(x)`: the arg is the first argument; `exp(x)`: the arg is the function
    name, args = (sp.text, [] if e.arg is None else [e.arg]) if sp.text else (e.arg, [])
    return f"{name}({', '.join(args + [format_expr(s) for s in e.src])})"


def _form_convert(e, sp, prec):
    if e.dtype is not DType.BOOL:
        return f"{e.dtype.value}({format_expr(e.src[0])})"
    if e.src[0].dtype is DType.BOOL:
        return format_expr(e.src[0], prec)
    # no bool() in kernels: conversion to bool is x != 0
    s = f"{format_expr(e.src[0], 6)} != {'0.0' if e.src[0].dtype is DType.F32 else '0'}"
    return f"({s})" if prec > 5 else s


def _form_prefix(e, sp, prec):
    s = f"{sp.text}{format_expr(e.src[0], min(sp.prec + 1, 14))}"
    return f"({s})" if prec > sp.prec else s


def _form_ternary(e, sp, prec):
    s = f"{format_expr(e.src[1], 2)} if {format_expr(e.src[0], 2)} else {format_expr(e.src[2], 1)}"
    return f"({s})" if prec > 0 else s


def _form_infix(e, sp, prec):
    # comparisons do not chain in our output: parenthesise nested ones
    p = sp.prec
    s = f"{format_expr(e.src[0], p + (1 if p == 5 else 0))} {sp.text} {format_expr(e.src[1], p + 1)}"
    return f"({s})" if prec > p else s


_FORMS = {
    "literal": _form_literal,
    "name": lambda e, sp, prec: f"{sp.text}{e.arg}",
    "call": _form_call,
    "index": lambda e, sp, prec: f"{e.arg}[{format_expr(e.src[0])}]",
    "prefix": _form_prefix,
    "infix": _form_infix,
    "ternary": _form_ternary,
    "convert": _form_convert,
    "reinterpret": lambda e, sp, prec: f"{sp.text}({format_expr(e.src[0])}, {e.dtype.value})",
}


def _param(p) -> str:
    if p.kind is ParamKind.BUFFER:
        return f"{p.name}: Buffer[{'bool' if p.dtype is DType.BOOL else p.dtype.value}]"
    if p.kind is ParamKind.CONST:
        return f"{p.name}: Const[int]"
    return f"{p.name}: {p.dtype.value}"


def format_stmts(body, indent: int = 1) -> list:
    pad = "    " * indent
    out = []
    for s in body:
        if isinstance(s, Assign):
            out.append(f"{pad}{s.name} = {format_expr(s.value)}")
        elif isinstance(s, Store):
            out.append(f"{pad}{s.buf}[{format_expr(s.index)}] = {format_expr(s.value)}")
        elif isinstance(s, PStore):
            out.append(f"{pad}{s.arr}[{format_expr(s.index)}] = {format_expr(s.value)}")
        elif isinstance(s, Private):
            dt = "bool" if s.dtype is DType.BOOL else s.dtype.value
            out.append(f"{pad}{s.name} = private({dt}, {format_expr(s.size)})")
        elif isinstance(s, Collective):
            out.append(f"{pad}{s.name} = {s.op.value}({format_expr(s.value)})")
        elif isinstance(s, If):
            out.append(f"{pad}if {format_expr(s.cond)}:")
            out.extend(format_stmts(s.then, indent + 1) or [f"{pad}    pass"])
            if s.orelse:
                out.append(f"{pad}else:")
                out.extend(format_stmts(s.orelse, indent + 1))
        elif isinstance(s, For):
            out.append(f"{pad}for {s.var} in range({format_expr(s.start)}, {format_expr(s.stop)}, "
                       f"{format_expr(s.step)}):")
            out.extend(format_stmts(s.body, indent + 1) or [f"{pad}    pass"])
        else:
            out.append(f"{pad}<{type(s).__name__}>")
    return out


def format_kernel(k: Kernel) -> str:
    head = [f"@kernel(block={k.block})"]
    if k.consts:
        head.append("# specialised: " + ", ".join(f"{n}={v}" for n, v in k.consts))
    head.append(f"def {k.name}({', '.join(_param(p) for p in k.params)}):")
    return "\n".join(head + (format_stmts(k.body) or ["    pass"]))
