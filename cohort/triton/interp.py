"""The reference: exact NumPy evaluation of a tile program, one program at a time (DESIGN §10).

Programs run in program-id order: axis 0 varies fastest, then axis 1, then axis 2
(pid (0,0,0), (1,0,0), ..., (0,1,0), ...). Within a program the statements
run in order; an expression is evaluated once per statement (memoised by node).
Memory: each pointer argument is the flat storage of its tensor; a pointer
tile is (argument, element-offset tile); an active access outside the storage
is a KernelRuntimeError naming the kernel line, program id, argument and offset.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..refimpl import semantics as S
from . import racecheck, tir, values
from .errors import KernelRuntimeError, where
from .mathx import math_f32
from .tir import Dt, K, Node, Ptr, Red


@dataclass
class PtrVal:
    base: str               # the pointer argument's name
    off: np.ndarray         # int64 element offsets from the argument's first element


@dataclass
class Buffer:
    flat: np.ndarray        # the whole storage, as the element type's carrier
    base: int               # the argument's first element within `flat`
    elem: Dt


class _Return(Exception):
    pass


def _imap(fn, v):
    return PtrVal(v.base, fn(v.off)) if isinstance(v, PtrVal) else fn(v)


def _ident(red: Red, d: Dt):
    if red is Red.SUM or red is Red.XOR or red is Red.OR:
        if d.is_float:
            return values.from_f32(np.float32(-0.0), d) if red is Red.SUM else None
        return np.zeros((), d.np)
    if red is Red.PROD:
        return values.from_f32(np.float32(1.0), d) if d.is_float and d is not Dt.F64 else np.ones((), d.np)
    if red is Red.AND:
        return np.invert(np.zeros((), d.np))
    lo, hi = (-np.inf, np.inf) if d.is_float else tir.int_range(d)
    v = hi if red is Red.MIN else lo
    if d.is_float:
        return values.from_f32(np.float32(v), d) if d is not Dt.F64 else np.float64(v)
    return np.asarray(v).astype(d.np)


def combine(red: Red, d: Dt, a, b):
    if red is Red.SUM:
        return values.binary(tir.Bin.ADD, d, a, b)
    if red is Red.PROD:
        return values.binary(tir.Bin.MUL, d, a, b)
    if red in (Red.MAX, Red.MIN):
        return values.minmax(red is Red.MAX, False, d, a, b)
    op = {Red.XOR: tir.Bin.XOR, Red.OR: tir.Bin.OR, Red.AND: tir.Bin.AND}[red]
    return values.binary(op, d, a, b)


def _pad_last(v, ident):
    n = v.shape[-1]
    p = 1
    while p < n:
        p *= 2
    if p == n:
        return v
    pad = np.broadcast_to(np.asarray(ident, v.dtype), v.shape[:-1] + (p - n,))
    return np.concatenate([v, pad], axis=-1)


def tree(vals, fn, idents):
    """The fixed tree over the last axis: pad to a power of two with the identity, then
    for s = P/2 .. 1: v[i] = fn(v[i], v[i+s]) for i < s. vals: a list of arrays
    reduced together (argmax carries (value, index)); fn maps lists to lists."""
    vs = [_pad_last(v, i) for v, i in zip(vals, idents)]
    s = vs[0].shape[-1] // 2
    while s >= 1:
        out = fn([v[..., :s] for v in vs], [v[..., s:2 * s] for v in vs])
        vs = [np.asarray(o) for o in out]
        s //= 2
    return [v[..., 0] for v in vs]


def hillis_steele(vals, fn):
    """Inclusive scan along the last axis: for d = 1, 2, 4, ... < n:
    v[i] = fn(v[i-d], v[i]) for i >= d (all i of one step at once)."""
    vs = [np.array(v) for v in vals]
    n = vs[0].shape[-1]
    d = 1
    while d < n:
        out = fn([v[..., :n - d] for v in vs], [v[..., d:] for v in vs])
        for v, o in zip(vs, out):
            v[..., d:] = o
        d *= 2
    return vs


class Interpreter:
    def __init__(self, prog: tir.Program, buffers: dict, scalars: dict, grid: tuple, race=None, undefined=None):
        """`race`: check mode's racecheck.RaceCheck, told of every access. `undefined`: what
        the masked-off lanes of a load without `other` hold, as a function of the load and the
        element type (None: zeros, the definition); check mode's undefined-lane probe
        (native.run_check) runs the reference again with other values there."""
        self.p, self.buffers, self.scalars, self.grid = prog, buffers, scalars, grid
        self.race, self.undefined = race, undefined
        self.pid = (0, 0, 0)
        self.line = 0
        self.unfilled: dict = {}        # id -> a load without `other` that left lanes masked off

    def fail(self, msg: str):
        return KernelRuntimeError(f"{where(self.p.name, self.p.filename, self.line)}, program "
                                  f"{self.pid}: {msg}")

    def run(self):
        g0, g1, g2 = self.grid
        for z in range(g2):
            for y in range(g1):
                for x in range(g0):
                    self.pid = (x, y, z)
                    self.env = {}
                    if self.race is not None:
                        self.race.begin(self.pid)
                    try:
                        self.block(self.p.body)
                    except _Return:
                        pass
                    except KernelRuntimeError:
                        raise
                    except Exception as e:     # never a traceback from inside cohort: say where
                        raise self.fail(f"evaluation failed: {type(e).__name__}: {e}") from None

    # ------------------------------------------------------------ statements
    def block(self, stmts):
        for st in stmts:
            self.line = st.line
            self.stmt(st)

    def stmt(self, st):
        if isinstance(st, tir.Let):
            self.env[st.var] = self.ev(st.value, {})
        elif isinstance(st, tir.Load):
            self.load(st)
        elif isinstance(st, tir.Store):
            self.store(st)
        elif isinstance(st, tir.Atomic):
            self.atomic(st)
        elif isinstance(st, tir.For):
            memo = {}
            a, b, c = (int(self.ev(x, memo)) for x in (st.start, st.stop, st.step))
            if c == 0:
                raise self.fail("range step is 0")
            dt = st.type.elem.np
            for i in range(a, b, c):
                self.env[st.var] = np.asarray(i).astype(dt)
                self.block(st.body)
                self.line = st.line
        elif isinstance(st, tir.While):
            while True:
                self.block(st.cond_body)
                self.line = st.line
                if not bool(self.ev(st.cond, {})):
                    break
                self.block(st.body)
        elif isinstance(st, tir.If):
            if bool(self.ev(st.cond, {})):
                self.block(st.then)
            else:
                self.block(st.orelse)
        elif isinstance(st, tir.Return):
            raise _Return()
        elif isinstance(st, tir.Assert):
            c = np.asarray(self.ev(st.cond, {}))
            if not np.all(c):
                raise self.fail(f"device_assert failed: {st.message}")
        elif isinstance(st, tir.Print):
            memo = {}
            vals = [self.ev(v, memo) for v in st.values]
            print(f"pid {self.pid} {st.prefix}", *[np.asarray(v) for v in vals])
        else:
            raise self.fail(f"unknown statement {type(st).__name__}")

    def _addresses(self, ptr: PtrVal, mask, what):
        buf = self.buffers[ptr.base]
        idx = ptr.off.astype(np.int64) + buf.base
        active = np.ones(idx.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask, bool), idx.shape)
        bad = active & ((idx < 0) | (idx >= buf.flat.size))
        if np.any(bad):
            k = np.flatnonzero(bad)[0]
            off = int(ptr.off.reshape(-1)[k]) if ptr.off.ndim else int(ptr.off)
            raise self.fail(f"{what} out of bounds: argument `{ptr.base}` offset {off} (its storage holds "
                            f"elements {-buf.base}..{buf.flat.size - buf.base - 1} from the argument's first)")
        return buf, np.where(active, idx, 0), active

    def load(self, st: tir.Load):
        memo = {}
        ptr = self.ev(st.ptr, memo)
        mask = None if st.mask is None else self.ev(st.mask, memo)
        buf, idx, active = self._addresses(ptr, mask, "load")
        if self.race is not None:
            self.race.access(self, ptr.base, buf, idx, active, racecheck.LOAD)
        out = buf.flat[idx] if buf.flat.size else np.zeros(idx.shape, buf.flat.dtype)
        if mask is not None:
            if st.other is not None:
                other = self.ev(st.other, memo)
            else:
                other = np.zeros((), out.dtype)
                if not active.all():
                    self.unfilled[id(st)] = st
                    if self.undefined is not None:
                        other = self.undefined(st, buf.elem)
            out = np.where(active, out, np.broadcast_to(np.asarray(other, out.dtype), out.shape))
        self.env[st.var] = np.asarray(out)

    def store(self, st: tir.Store):
        memo = {}
        ptr = self.ev(st.ptr, memo)
        val = np.broadcast_to(np.asarray(self.ev(st.value, memo)), ptr.off.shape)
        mask = None if st.mask is None else self.ev(st.mask, memo)
        buf, idx, active = self._addresses(ptr, mask, "store")
        if self.race is not None:
            self.race.access(self, ptr.base, buf, idx, active, racecheck.STORE)
        sel = active.reshape(-1)
        buf.flat[idx.reshape(-1)[sel]] = val.reshape(-1)[sel]    # duplicates: the last in row-major order

    def atomic(self, st: tir.Atomic):
        memo = {}
        ptr = self.ev(st.ptr, memo)
        val = np.broadcast_to(np.asarray(self.ev(st.value, memo)), ptr.off.shape).reshape(-1)
        cmp = None if st.cmp is None else np.broadcast_to(np.asarray(self.ev(st.cmp, memo)), ptr.off.shape).reshape(-1)
        mask = None if st.mask is None else self.ev(st.mask, memo)
        buf, idx, active = self._addresses(ptr, mask, f"atomic_{st.op}")
        flat, elem = buf.flat, buf.elem
        old = np.zeros(idx.size, flat.dtype)
        for k, (a, on) in enumerate(zip(idx.reshape(-1), active.reshape(-1))):
            if not on:
                continue
            o = flat[a]
            old[k] = o
            flat[a] = _atomic_new(st.op, elem, o, val[k], None if cmp is None else cmp[k])
            if self.race is not None:       # a failed compare-and-swap only reads: it releases nothing
                wrote = st.op != "cas" or np.asarray(o).tobytes() == np.asarray(cmp[k], o.dtype).tobytes()
                self.race.atomic(self, ptr.base, buf, int(a), wrote, st.sem in ("acq_rel", "acquire"),
                                 wrote and st.sem in ("acq_rel", "release"))
        self.env[st.var] = old.reshape(ptr.off.shape)

    # ------------------------------------------------------------ expressions
    def ev(self, n: Node, memo: dict):
        r = memo.get(id(n))
        if r is None:
            r = memo[id(n)] = self._ev(n, memo)
        return r

    def _ev(self, n: Node, memo):
        op, t = n.op, n.type
        if op is K.VAR:
            return self.env[n.arg]
        if op is K.CONST:
            return np.broadcast_to(const_value(n.arg, t.elem), t.shape)
        if op is K.PARAM:
            if isinstance(t.elem, Ptr):
                return PtrVal(n.arg, np.zeros((), np.int64))
            return np.asarray(self.scalars[n.arg])
        if op is K.PROGRAM_ID:
            return np.int32(self.pid[n.arg])
        if op is K.NUM_PROGRAMS:
            return np.int32(self.grid[n.arg])
        if op is K.ARANGE:
            return np.arange(n.arg, n.arg + t.shape[0], dtype=np.int32)
        s = [self.ev(x, memo) for x in n.srcs]
        if op is K.BROADCAST:
            return _imap(lambda v: np.broadcast_to(v, t.shape), s[0])
        if op is K.RESHAPE:
            return _imap(lambda v: np.reshape(v, t.shape), s[0])
        if op is K.PERMUTE:
            return _imap(lambda v: np.transpose(v, n.arg), s[0])
        if op is K.EXPAND:
            return _imap(lambda v: np.expand_dims(v, n.arg), s[0])
        if op is K.PTR_ADD:
            o = np.asarray(s[1])
            o64 = o.view(np.int64) if o.dtype == np.uint64 else o.astype(np.int64)
            return PtrVal(s[0].base, np.broadcast_to(s[0].off, t.shape) + o64)
        if op is K.JOIN:
            return np.stack(np.broadcast_arrays(s[0], s[1]), axis=-1)
        if op is K.SPLIT:
            return np.asarray(s[0])[..., n.arg]
        src_dt = n.srcs[0].elem if n.srcs else None
        try:
            return self._arith(n, s, src_dt)
        except values.ValueError_ as e:
            raise self.fail(str(e)) from None

    def _arith(self, n, s, sd):
        op, t = n.op, n.type
        if op is K.CAST:
            return values.cast(s[0], sd, t.elem)
        if op is K.BITCAST:
            return values.bitcast(s[0], sd, t.elem)
        if op is K.UNARY:
            return values.unary(n.arg, sd, s[0])
        if op is K.BINARY:
            return values.binary(n.arg, sd, s[0], s[1])
        if op is K.MINMAX:
            return values.minmax(n.arg[0], n.arg[1], sd, s[0], s[1])
        if op is K.CMP:
            return values.compare(n.arg, sd, s[0], s[1])
        if op is K.WHERE:
            return np.where(s[0], s[1], s[2])
        if op is K.FMA:
            return values.from_f32(S.fma(values.to_f32(s[0], sd), values.to_f32(s[1], sd),
                                         values.to_f32(s[2], sd)), sd)
        if op is K.MATH:
            if sd is Dt.F64:
                return np.sqrt(s[0]) if n.arg == "sqrt" else np.abs(s[0])
            return math_f32(n.arg, s[0])
        if op is K.UMULHI:
            return _umulhi(sd, s[0], s[1])
        if op is K.REDUCE:
            axis, red = n.arg
            v = np.moveaxis(np.asarray(s[0]), axis, -1)
            return tree([v], lambda a, b: [combine(red, sd, a[0], b[0])], [_ident(red, sd)])[0]
        if op is K.ARGREDUCE:
            axis, is_max = n.arg
            v = np.moveaxis(np.asarray(s[0]), axis, -1)
            idx = np.broadcast_to(np.arange(v.shape[-1], dtype=np.int32), v.shape)
            ident = _ident(Red.MAX if is_max else Red.MIN, sd)
            return tree([v, idx], lambda a, b: _arg_combine(is_max, sd, a, b), [ident, np.int32(2 ** 31 - 1)])[1]
        if op is K.SCAN:
            axis, red, reverse = n.arg
            v = np.moveaxis(np.asarray(s[0]), axis, -1)
            if reverse:
                v = v[..., ::-1]
            r = hillis_steele([v], lambda a, b: [combine(red, sd, a[0], b[0])])[0]
            if reverse:
                r = r[..., ::-1]
            return np.moveaxis(r, -1, axis)
        if op is K.COMBINE:
            return self._combine(n, s)
        if op is K.DOT:
            if len(t.shape) == 3:      # a batch of independent products, each as a 2-D dot
                return np.stack([_dot(a, b, c, t.elem) for a, b, c in
                                 zip(*(np.broadcast_to(x, sh) for x, sh in zip(s, (n.srcs[0].shape, n.srcs[1].shape,
                                                                                     t.shape))))])
            return _dot(s[0], s[1], s[2], t.elem)
        if op is K.GATHER:
            return self._gather(n, s)
        if op is K.HISTOGRAM:
            v = np.asarray(s[0]).astype(np.int64)
            keep = (v >= 0) & (v < n.arg)
            if len(s) > 1:
                keep &= np.asarray(s[1], bool)
            return np.bincount(v[keep], minlength=n.arg).astype(np.int32)
        raise self.fail(f"no evaluation for {op.name}")

    def _gather(self, n, s):
        src, index = np.asarray(s[0]), np.asarray(s[1]).astype(np.int64)
        size = n.srcs[0].shape[n.arg]
        bad = (index < 0) | (index >= size)
        if bad.any():
            raise self.fail(f"tl.gather index {int(index[bad].flat[0])} outside 0..{size - 1} of axis {n.arg}")
        return np.take_along_axis(np.broadcast_to(src, n.srcs[0].shape), index, axis=n.arg)

    def _combine(self, n, s):
        kind, axis, region, which, reverse = n.arg
        vs = [np.moveaxis(np.asarray(x), axis, -1) for x in s]
        k = len(vs)

        def fn(a, b):
            saved = self.env
            self.env = dict(saved)
            for name, v in zip(region.params, list(a) + list(b)):
                self.env[name] = v
            try:
                for st in region.body:
                    self.env[st.var] = self.ev(st.value, {})
                memo = {}
                return [np.asarray(self.ev(r, memo)) for r in region.results]
            finally:
                self.env = saved
        if kind == "reduce":
            n_ = vs[0].shape[-1]
            if n_ & (n_ - 1):
                raise self.fail("tl.reduce with a user combine function over a non-power-of-two axis")
            return tree(vs, fn, [None] * k)[which]
        if reverse:
            vs = [v[..., ::-1] for v in vs]
        r = hillis_steele(vs, fn)[which]
        if reverse:
            r = r[..., ::-1]
        return np.moveaxis(r, -1, axis)


def _arg_combine(is_max, d, a, b):
    (v1, i1), (v2, i2) = a, b
    x, y = (values.to_f32(v1, d), values.to_f32(v2, d)) if d.is_float else (v1, v2)
    tie = (x == y) & (i1 < i2)
    pick = ((x > y) if is_max else (x < y)) | tie
    return [np.where(pick, v1, v2), np.where(pick, i1, i2)]


def const_value(value, d: Dt):
    if d.is_float:
        return values.cast(np.float64(value), Dt.F64, d) if d is not Dt.F64 else np.float64(value)
    return np.asarray(value).astype(np.int64 if not (d.is_int and not d.is_signed and d.bits == 64)
                                    else np.uint64).astype(d.np) if d is not Dt.I1 else np.bool_(value)


def _umulhi(d: Dt, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if d.bits != 32:
        raise values.ValueError_("umulhi on 64-bit integers is not supported")
    if d.is_signed:
        return ((a.astype(np.int64) * b.astype(np.int64)) >> 32).astype(np.int32)
    return ((a.astype(np.uint64) * b.astype(np.uint64)) >> np.uint64(32)).astype(np.uint32)


def _dot(a, b, acc, out: Dt):
    """c[i,j] = fma chain over k ascending from the accumulator (DESIGN §4 matmul)."""
    a, b = np.asarray(a), np.asarray(b)
    c = np.array(np.broadcast_to(acc, (a.shape[0], b.shape[1])))
    if out is Dt.F32:
        for k in range(a.shape[1]):
            c = np.asarray(S.fma(a[:, k:k + 1], b[k:k + 1, :], c), np.float32)
        return c
    c = c.astype(np.int64)
    for k in range(a.shape[1]):
        c = c + a[:, k:k + 1].astype(np.int64) * b[k:k + 1, :].astype(np.int64)
    return (c & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _atomic_new(op, elem: Dt, old, v, cmp):
    o, v = np.asarray(old), np.asarray(v)
    if op == "xchg":
        return v
    if op == "cas":                    # compares bits, as the hardware does (-0.0 != +0.0, NaN == same NaN)
        same = np.asarray(o).tobytes() == np.asarray(cmp, o.dtype).tobytes()
        return v if same else o
    if elem.is_float:                  # max/min: cohort's f32 rule (canonical NaN; -0 below +0)
        if np.isnan(o) or np.isnan(v):
            return np.uint32(S.CANONICAL_NAN_BITS).view(np.float32)
        ko, kv = S.f32_order_key(o.view(np.int32)), S.f32_order_key(np.asarray(v, np.float32).view(np.int32))
        return v if (kv > ko if op == "max" else kv < ko) else o
    with np.errstate(all="ignore"):
        if op == "add":
            return np.add(o, v)
        if op == "max":
            return max(o, v)
        if op == "min":
            return min(o, v)
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](o, v)
