"""tl.load, tl.store and the atomics as tile IR statements (DESIGN §10 'Memory')."""
from __future__ import annotations

from . import tir
from .frontend import unwrap
from .tir import TT, Dt, K, Node, Ptr

ATOMICS = ("add", "max", "min", "and", "or", "xor", "xchg")


def register(B, reg, tl):
    fe = B.fe

    def pointer(p, what):
        p = unwrap(p)
        if isinstance(p, Node) and isinstance(p.elem, Ptr):
            return p
        if p is not None and type(p).__name__ in ("tensor_descriptor", "tensor_descriptor_base"):
            raise fe.unsupported(f"{what} through a tensor descriptor as a pointer", "use desc.load/desc.store")
        raise fe.type_error(f"{what} needs a pointer tile, got {getattr(p, 'type', type(p).__name__)!r}")

    def mask_of(mask, shape):
        if unwrap(mask) is None:
            return None
        m = B.to_bool(B.tile(mask))
        return B.broadcast_to(m, shape)

    def load(pointer_, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
             eviction_policy="", volatile=False):
        p = pointer(pointer_, "tl.load")
        if unwrap(boundary_check):
            raise fe.unsupported("tl.load(boundary_check=...)", "that belongs to block pointers")
        m = unwrap(mask)
        if m is not None:
            mt = B.to_bool(B.tile(m))
            p, mt = B.bcast(p, mt)
            m = mt
        elem = p.elem.elem
        o = unwrap(other)
        if o is not None:
            if m is None:
                o = None                          # Triton ignores other without a mask
            else:
                o = B.broadcast_to(B.convert(B.tile(o), elem), p.shape)
        name = fe.fresh("load")
        tt = TT(elem, p.shape)
        fe.vars[name] = tt
        fe.emit(tir.Load(name, tt, p, m, o, fe.line))
        return Node(K.VAR, tt, (), name)

    def store(pointer_, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
        p = pointer(pointer_, "tl.store")
        if unwrap(boundary_check):
            raise fe.unsupported("tl.store(boundary_check=...)", "that belongs to block pointers")
        v = B.tile(value)
        if isinstance(v.elem, Ptr):
            raise fe.unsupported("storing pointers")
        p, v = B.bcast(p, v)
        v = B.convert(v, p.elem.elem)
        m = mask_of(mask, p.shape)
        if m is not None:
            p, m = B.bcast(p, m)
            v = B.broadcast_to(v, p.shape)
        fe.emit(tir.Store(p, v, m, fe.line))

    reg(tl.load, load)
    reg(tl.store, store)

    def atomic(op):
        def h(pointer_, val, mask=None, sem=None, scope=None):
            p = pointer(pointer_, f"tl.atomic_{op}")
            elem = p.elem.elem
            v = B.tile(val)
            p, v = B.bcast(p, v)
            v = B.convert(v, elem)
            if elem.is_float and op == "add":
                raise fe.unsupported(f"tl.atomic_add on {elem!r}",
                                     "a float sum depends on the order of the updates, which cohort does not "
                                     "leave open: reduce with tl.sum inside a program and combine the programs' "
                                     "partial sums in a second kernel (or accumulate in integers)")
            if elem.is_float and op in ("and", "or", "xor"):
                raise fe.type_error(f"tl.atomic_{op} on {elem!r}")
            if elem in (Dt.F16, Dt.BF16, Dt.F64) and op != "xchg":
                raise fe.unsupported(f"tl.atomic_{op} on {elem!r}", "atomics on f32 and integers")
            if elem.is_int and elem.bits < 32:
                raise fe.unsupported(f"tl.atomic_{op} on {elem!r}", "atomics on 32- and 64-bit elements")
            m = mask_of(mask, p.shape)
            name = fe.fresh("atomic")
            tt = TT(elem, p.shape)
            fe.vars[name] = tt
            fe.emit(tir.Atomic(name, op, p, v, None, m, fe.line))
            return Node(K.VAR, tt, (), name)
        return h

    for op in ATOMICS:
        reg(getattr(tl, f"atomic_{op}", None), atomic(op))

    def atomic_cas(pointer_, cmp, val, sem=None, scope=None):
        p = pointer(pointer_, "tl.atomic_cas")
        elem = p.elem.elem
        c, v = B.tile(cmp), B.tile(val)
        p, c, v = B.bcast(p, c, v)
        c, v = B.convert(c, elem), B.convert(v, elem)
        if elem.bits < 16 or elem is Dt.BF16:
            raise fe.unsupported(f"tl.atomic_cas on {elem!r}")
        name = fe.fresh("cas")
        tt = TT(elem, p.shape)
        fe.vars[name] = tt
        fe.emit(tir.Atomic(name, "cas", p, v, c, None, fe.line))
        return Node(K.VAR, tt, (), name)

    reg(tl.atomic_cas, atomic_cas)

    def descriptor(*a, **k):
        raise fe.unsupported("`tl.make_tensor_descriptor`",
                             "tensor descriptors are not in cohort.triton's reference yet; index with "
                             "pointer arithmetic and masks")

    reg(getattr(tl, "make_tensor_descriptor", None), descriptor)
    reg(getattr(tl, "load_tensor_descriptor", None), descriptor)
    reg(getattr(tl, "store_tensor_descriptor", None), descriptor)
