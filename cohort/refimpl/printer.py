"""The printer. Its output is valid frontend source: printing a kernel and
parsing the text again gives a kernel with the same meaning (shared
subexpressions are printed once per use). How each operation is written is its
registry record's `spelling` (opdefs.py); this file implements each form once.

Two styles: readable (the default: weakly typed literals, minimal parentheses)
and `exact` (typed literals `f32(1.5)`, `i32(-3)`, every operation
parenthesised), whose text the frontend turns back into the same IR node for
node — the fuzzer's source path (verify/gen/pysource.py) relies on it."""
from __future__ import annotations

import math

from .expr import Expr
from .irtypes import DType, ParamKind
from .opdefs import OPDEFS
from .stmts import Field, stmt_def


def _literal(v, dt: DType, exact: bool = False) -> str:
    if exact and dt is not DType.BOOL:
        if dt is DType.F32:
            return f"f32({_literal(v, dt)})"
        return f"{dt.value}({int(v)})"
    if dt is DType.F32:
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INF" if v > 0 else "-INF"
        return repr(float(v))
    if dt is DType.BOOL:
        return repr(bool(v))
    return repr(int(v)) if dt is DType.I32 else f"u32({int(v)})"


_ALL = 99     # a binding level above every operator's: parenthesise whatever is printed at it


def format_expr(e: Expr, prec: int = 0, exact: bool = False) -> str:
    """`e` as source, parenthesised where an operator binding at `prec` needs it
    (`exact`: typed literals, every operation parenthesised)."""
    d = OPDEFS[e.op]
    sp = d.spelling_for(e)
    return _FORMS[sp.form](e, sp, _ALL if exact else prec, exact)


def _sub(e: Expr, prec: int, exact: bool) -> str:
    return format_expr(e, _ALL if exact else prec, exact)


def _form_literal(e, sp, prec, exact):
    s = _literal(e.arg, e.dtype, exact)
    return f"({s})" if s.startswith("-") and prec > 13 else s


def _form_call(e, sp, prec, exact):
    # `len(x)`: the arg is the first argument; `exp(x)`: the arg is the function
    name, args = (sp.text, [] if e.arg is None else [e.arg]) if sp.text else (e.arg, [])
    return f"{name}({', '.join(args + [_sub(s, 0, exact) for s in e.src])})"


def _form_convert(e, sp, prec, exact):
    if e.dtype is not DType.BOOL:
        return f"{e.dtype.value}({_sub(e.src[0], 0, exact)})"
    if e.src[0].dtype is DType.BOOL:
        return format_expr(e.src[0], prec, exact)
    # no bool() in kernels: conversion to bool is x != 0
    zero = _literal(0, e.src[0].dtype, exact) if e.src[0].dtype is not DType.F32 else \
        ("f32(0.0)" if exact else "0.0")
    s = f"{_sub(e.src[0], 6, exact)} != {zero}"
    return f"({s})" if prec > 5 else s


def _form_prefix(e, sp, prec, exact):
    s = f"{sp.text}{_sub(e.src[0], min(sp.prec + 1, 14), exact)}"
    return f"({s})" if prec > sp.prec else s


def _form_ternary(e, sp, prec, exact):
    s = f"{_sub(e.src[1], 2, exact)} if {_sub(e.src[0], 2, exact)} else {_sub(e.src[2], 1, exact)}"
    return f"({s})" if prec > 0 else s


def _form_infix(e, sp, prec, exact):
    # comparisons do not chain in our output: parenthesise nested ones
    p = sp.prec
    s = f"{_sub(e.src[0], p + (1 if p == 5 else 0), exact)} {sp.text} {_sub(e.src[1], p + 1, exact)}"
    return f"({s})" if prec > p else s


_FORMS = {
    "literal": _form_literal,
    "name": lambda e, sp, prec, exact: f"{sp.text}{e.arg}",
    "call": _form_call,
    "index": lambda e, sp, prec, exact: f"{e.arg}[{_sub(e.src[0], 0, exact)}]",
    "prefix": _form_prefix,
    "infix": _form_infix,
    "ternary": _form_ternary,
    "convert": _form_convert,
    "reinterpret": lambda e, sp, prec, exact: f"{sp.text}({_sub(e.src[0], 0, exact)}, {e.dtype.value})",
}


def _param(p) -> str:
    if p.kind is ParamKind.BUFFER:
        return f"{p.name}: Buffer[{'bool' if p.dtype is DType.BOOL else p.dtype.value}]"
    if p.kind is ParamKind.CONST:
        return f"{p.name}: Const[int]"
    return f"{p.name}: {p.dtype.value}"


def statement_lines(body, line, indent: int = 0, pad: str = "    ") -> list:
    """The lines of a statement list: each statement's own line `line(s)` (an `if`'s or a
    `for`'s header), its bodies one level deeper; an empty body is `pass`, a later body
    under its keyword (`else:`) is left out when empty. The printer's layout, and the
    fuzzer's IR dump's (verify/gen/pysource.ir_text, which prints each statement differently)."""
    out = []
    for s in body:
        out.append(pad * indent + line(s))
        d = stmt_def(s)
        keywords = dict(d.keywords)
        for f in d.names(Field.BODY):
            sub = getattr(s, f)
            if f in keywords:
                if sub:
                    out.append(pad * indent + keywords[f] + ":")
                    out.extend(statement_lines(sub, line, indent + 1, pad))
            else:
                out.extend(statement_lines(sub, line, indent + 1, pad) or [pad * (indent + 1) + "pass"])
    return out


def _dtype_name(dt: DType) -> str:
    return "bool" if dt is DType.BOOL else dt.value


def format_stmt(s, exact: bool = False) -> str:
    """One statement's own line (an `if`'s or a `for`'s header, without its bodies)."""
    d = stmt_def(s)
    text = {}
    for f, kind, _ in d.fields:
        v = getattr(s, f)
        text[f] = (format_expr(v, 0, exact) if kind is Field.EXPR else _dtype_name(v) if kind is Field.DTYPE
                   else v.value if kind is Field.ENUM else v)
    return d.line.format(**{f: t for f, t in text.items() if not isinstance(t, tuple)})


def format_stmts(body, indent: int = 1, exact: bool = False) -> list:
    return statement_lines(body, lambda s: format_stmt(s, exact), indent)


def format_kernel(k, exact: bool = False) -> str:
    head = [f"@kernel(block={k.block})"]
    if k.consts:
        head.append("# specialised: " + ", ".join(f"{n}={v}" for n, v in k.consts))
    head.append(f"def {k.name}({', '.join(_param(p) for p in k.params)}):")
    return "\n".join(head + (format_stmts(k.body, 1, exact) or ["    pass"]))
