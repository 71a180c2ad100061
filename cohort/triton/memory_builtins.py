"""tl.load, tl.store and the atomics as tile IR statements (DESIGN §10 'Memory')."""
from __future__ import annotations

from . import tir
from .tir import TT, Dt, K, Node, Ptr
from .tl_objects import unwrap

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

    def memory_order(sem, what):
        sem = unwrap(sem)
        if sem is None:
            return "acq_rel"                 # Triton's default
        if sem not in ("acq_rel", "acquire", "release", "relaxed"):
            raise fe.type_error(f"{what}: sem={sem!r} (expected 'acq_rel', 'acquire', 'release' or 'relaxed')")
        return sem

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
            fe.emit(tir.Atomic(name, op, p, v, None, m, fe.line, memory_order(sem, f"tl.atomic_{op}")))
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
        fe.emit(tir.Atomic(name, "cas", p, v, c, None, fe.line, memory_order(sem, "tl.atomic_cas")))
        return Node(K.VAR, tt, (), name)

    reg(tl.atomic_cas, atomic_cas)

    def make_descriptor(base, shape, strides, block_shape, padding_option="zero"):
        p = pointer(base, "tl.make_tensor_descriptor")
        shape, strides, block = (list(unwrap(x)) for x in (shape, strides, block_shape))
        if not (len(shape) == len(strides) == len(block) >= 1):
            raise fe.type_error("tl.make_tensor_descriptor: shape, strides and block_shape differ in length")
        block = [unwrap(b) for b in block]
        for b in block:
            if not isinstance(b, int) or b <= 0 or b & (b - 1):
                raise fe.type_error(f"tensor descriptor block shape {block}: powers of two")
        pad = unwrap(padding_option)
        if pad not in ("zero", "", None):
            raise fe.unsupported(f"tensor descriptor padding_option={pad!r}", "zero padding")
        return TensorDesc(B, p, [B.tile(x) for x in shape], [B.tile(x) for x in strides], block)

    reg(getattr(tl, "make_tensor_descriptor", None), make_descriptor)

    def refuse_desc(*a, **k):
        raise fe.unsupported("`tl.load_tensor_descriptor`/`store_tensor_descriptor`", "use desc.load/desc.store")

    reg(getattr(tl, "load_tensor_descriptor", None), refuse_desc)
    reg(getattr(tl, "store_tensor_descriptor", None), refuse_desc)
    B.load, B.store = load, store


class TensorDesc:
    """A device-side tensor descriptor: a block of `block` elements at given offsets, the
    elements outside `shape` read as zero and not written (Triton's padding_option="zero")."""

    def __init__(self, B, base, shape, strides, block):
        self.B, self.base, self.shape, self.strides, self.block_shape = B, base, shape, strides, block
        import triton.language as tl

        from .tl_objects import tl_dtype
        self.dtype = tl_dtype(base.elem.elem)
        self.tl = tl

    def _address(self, offsets):
        B = self.B
        offsets = list(unwrap(offsets))
        if len(offsets) != len(self.block_shape):
            raise B.fe.type_error(f"tensor descriptor of rank {len(self.block_shape)} indexed by "
                                  f"{len(offsets)} offsets")
        rank = len(self.block_shape)
        ptr, mask = self.base, None
        for d, (o, n) in enumerate(zip(offsets, self.block_shape)):
            idx = B.binop("Add", B.fe.call(self.tl.arange, [0, n], {}), o)
            idx = B.convert(idx, Dt.I64) if idx.elem is not Dt.I64 else idx
            shape = (1,) * d + (n,) + (1,) * (rank - d - 1)
            idx = Node(K.RESHAPE, TT(idx.elem, shape), (idx,))
            ok = B.logical(True, B.compare("GtE", idx, 0), B.compare("Lt", idx, self.shape[d]))
            ptr = B.ptr_add(ptr, B.binop("Mult", idx, self.strides[d]), False)
            mask = ok if mask is None else B.logical(True, mask, ok)
        return ptr, mask

    def load(self, offsets):
        ptr, mask = self._address(offsets)
        return self.B.load(ptr, mask=mask, other=0)

    def store(self, offsets, value):
        ptr, mask = self._address(offsets)
        v = self.B.tile(value)
        if list(v.shape) != list(self.block_shape):
            raise self.B.fe.type_error(f"tensor descriptor store of shape {list(v.shape)} into blocks of "
                                       f"{self.block_shape}")
        return self.B.store(ptr, v, mask=mask)
