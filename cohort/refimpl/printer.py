"""A readable printer. Its output is valid frontend source: printing a kernel
and parsing the text again gives a kernel with the same meaning (shared
subexpressions are printed once per use)."""
from __future__ import annotations

import math

from .ir import (Assign, Collective, DType, Expr, For, If, Kernel, Op, ParamKind, Private, PStore,
                 Store)

_INFIX = {Op.ADD: ("+", 11), Op.SUB: ("-", 11), Op.MUL: ("*", 12), Op.MOD: ("%", 12),
          Op.AND: ("&", 8), Op.OR: ("|", 6), Op.XOR: ("^", 7), Op.SHL: ("<<", 10), Op.SHR: (">>", 10),
          Op.LT: ("<", 5), Op.LE: ("<=", 5), Op.GT: (">", 5), Op.GE: (">=", 5), Op.EQ: ("==", 5),
          Op.NE: ("!=", 5)}
_CALL0 = {Op.THREAD_ID: "thread_id", Op.BLOCK_ID: "block_id", Op.GLOBAL_ID: "global_id",
          Op.BLOCK_SIZE: "block_size", Op.NUM_THREADS: "num_threads"}


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
    op = e.op
    if op is Op.CONST:
        s = _literal(e.arg, e.dtype)
        return f"({s})" if s.startswith("-") and prec > 13 else s
    if op in (Op.VAR, Op.PARAM):
        return e.arg
    if op is Op.ARG:
        return f"$arg{e.arg}"
    if op in _CALL0:
        return f"{_CALL0[op]}()"
    if op is Op.BUFLEN:
        return f"len({e.arg})"
    if op in (Op.LOAD, Op.PLOAD):
        return f"{e.arg}[{format_expr(e.src[0])}]"
    if op is Op.MATH:
        return f"{e.arg}({format_expr(e.src[0])})"
    if op is Op.SQRT:
        return f"sqrt({format_expr(e.src[0])})"
    if op is Op.FMA:
        return f"fma({', '.join(format_expr(s) for s in e.src)})"
    if op is Op.ABS:
        return f"abs({format_expr(e.src[0])})"
    if op in (Op.MIN, Op.MAX):
        return f"{op.name.lower()}({format_expr(e.src[0])}, {format_expr(e.src[1])})"
    if op is Op.CAST and e.dtype is DType.BOOL:  # no bool() in kernels: conversion to bool is x != 0
        if e.src[0].dtype is DType.BOOL:
            return format_expr(e.src[0], prec)
        s = f"{format_expr(e.src[0], 6)} != {'0.0' if e.src[0].dtype is DType.F32 else '0'}"
        return f"({s})" if prec > 5 else s
    if op is Op.CAST:
        return f"{e.dtype.value}({format_expr(e.src[0])})"
    if op is Op.BITCAST:
        return f"bitcast({format_expr(e.src[0])}, {e.dtype.value})"
    if op is Op.NEG:
        s = f"-{format_expr(e.src[0], 14)}"
        return f"({s})" if prec > 13 else s
    if op is Op.NOT:
        if e.dtype is DType.BOOL:
            s = f"not {format_expr(e.src[0], 4)}"
            return f"({s})" if prec > 3 else s
        return f"~{format_expr(e.src[0], 14)}"
    if op is Op.SELECT:
        s = f"{format_expr(e.src[1], 2)} if {format_expr(e.src[0], 2)} else {format_expr(e.src[2], 1)}"
        return f"({s})" if prec > 0 else s
    if op is Op.DIV:
        sym, p = ("/" if e.dtype is DType.F32 else "//"), 12
    else:
        sym, p = _INFIX[op]
    # comparisons do not chain in our output: parenthesise nested ones
    right = p + 1
    s = f"{format_expr(e.src[0], p + (1 if p == 5 else 0))} {sym} {format_expr(e.src[1], right)}"
    return f"({s})" if prec > p else s


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
