"""The quick launch path: a kernel's parameters checked and written into its
argument block from the arguments' own headers, in well under the time of
check_args (which converts and copies nothing either, but goes through NumPy's
Python accessors: ~1 us to read one array's address).

A plan is made once per specialised kernel. `fill` vouches only for the plain
cases - an ndarray (exactly, no subclass) or torch.Tensor of the parameter's
dtype, C-contiguous and writable; a Python or NumPy float for f32; a Python or
NumPy integer in range for i32/u32 - and answers False for anything else, which
the caller hands to check_args for the verdict and the error message. So the
errors stay check_args's, and an unusual but valid argument still launches.

For NumPy arrays and Python numbers a small native function does the whole
fill (dict look-ups, header checks, overlap test, f32 rounding) in one call;
it reads NumPy's and CPython's object structs, whose layout is checked against
the documented accessors at import (any mismatch, or a Python other than
CPython, leaves the Python fill, which reads the same fields via ctypes or,
failing that too, via NumPy's accessors).
"""
from __future__ import annotations

import ctypes
import struct
import sys
import threading

import numpy as np

from ..refimpl.ir import I32_MAX, I32_MIN, U32_MAX, DType, Kernel, ParamKind
from ..refimpl.launch_check import written_buffers
from . import inject, jit
from .context import SLOT_BEGIN, SLOT_END, SLOT_N, SLOT_PROOF, abi_slots


class _ArrayHead(ctypes.Structure):
    """The leading fields of NumPy's PyArrayObject (its public C struct)."""
    _fields_ = [("refcnt", ctypes.c_ssize_t), ("type", ctypes.c_size_t), ("data", ctypes.c_size_t),
                ("nd", ctypes.c_int), ("dims", ctypes.c_size_t), ("strides", ctypes.c_size_t),
                ("base", ctypes.c_size_t), ("descr", ctypes.c_size_t), ("flags", ctypes.c_int)]


_C_CONTIGUOUS, _OWNDATA, _WRITEABLE = 0x0001, 0x0004, 0x0400     # NPY_ARRAY_* flags
_CW = _C_CONTIGUOUS | _WRITEABLE
_OFFSETS = {name: getattr(_ArrayHead, name).offset for name in ("type", "data", "nd", "dims", "descr", "flags")}


def _head_agrees() -> bool:
    """Do the struct offsets read what NumPy's accessors say, for arrays of every kind here?"""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    base = np.arange(24, dtype=np.float32)
    frozen = base.copy()
    frozen.setflags(write=False)
    for a in (base, base[::2], base.reshape(4, 6).T, frozen, base[5:], np.zeros(0, np.int32),
              base.reshape(2, 3, 4), np.zeros((), np.uint32)):
        h = _ArrayHead.from_address(id(a))
        if (h.type != id(np.ndarray) or h.data != a.ctypes.data or h.descr != id(a.dtype)
                or h.nd != a.ndim
                or bool(h.flags & _C_CONTIGUOUS) != a.flags.c_contiguous
                or bool(h.flags & _WRITEABLE) != a.flags.writeable or bool(h.flags & _OWNDATA) != a.flags.owndata):
            return False
        if a.ndim and tuple((ctypes.c_ssize_t * a.ndim).from_address(h.dims)) != a.shape:
            return False    # dereferenced only once the fields around it read right
    return True


def _float_agrees() -> bool:
    """A Python float's value sits right after its object header (PyFloatObject.ob_fval)."""
    x = 1.0 / 3.0
    return (ctypes.c_size_t.from_address(id(x) + 8).value == id(float)
            and ctypes.c_double.from_address(id(x) + 16).value == x)


_HEAD_OK = _head_agrees()
_NATIVE_OK = _HEAD_OK and _float_agrees()
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_F32_TYPES = frozenset((float, np.float32, np.float64))
_INT_TYPES = frozenset((int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64))
_torch_state: dict = {}    # "tensor": torch.Tensor, "dtypes": {NumPy dtype: torch dtype}, once a tensor was seen


def _torch_seen():
    """Learn torch's Tensor type and dtypes, from a tensor the caller passed (torch is
    imported already then; it is never imported for NumPy-only launches)."""
    import torch
    dtypes = {np.dtype(np.float32): torch.float32, np.dtype(np.int32): torch.int32,
              np.dtype(np.float16): torch.float16, np.dtype(np.uint16): torch.bfloat16}   # f16, bf16 buffers
    if hasattr(torch, "uint32"):
        dtypes[np.dtype(np.uint32)] = torch.uint32
    _torch_state.update(dtypes=dtypes, tensor=torch.Tensor)
    return torch.Tensor


def _header(a: np.ndarray):
    """(data address, NumPy flags) of an array."""
    if _HEAD_OK:
        h = _ArrayHead.from_address(id(a))
        return h.data, h.flags
    f = a.flags
    return a.ctypes.data, ((_C_CONTIGUOUS if f.c_contiguous else 0) | (_WRITEABLE if f.writeable else 0)
                           | (_OWNDATA if f.owndata else 0))


# ------------------------------------------------------------ the native fill
# The plan table (int64): count, nbuf, nf32, nint, &PyArray_Type, &PyFloat_Type,
# &PyLong_Type, 0; then per buffer: name, descr, ptr slot, len slot, itemsize, 0;
# per f32: name, slot; per int: name, slot, lo, hi. Returns 0 when every argument
# was plain and is written, else 1 (the block may then be half-written). With
# `written` set, the buffers' slots are already filled (torch tensors, in Python)
# and only the overlap test and the scalars remain.

_IR = r"""
declare ptr @PyDict_GetItem(ptr, ptr)
declare i64 @PyDict_Size(ptr)
declare i64 @PyLong_AsLongLongAndOverflow(ptr, ptr)
declare double @llvm.fabs.f64(double)
declare float @llvm.fabs.f32(float)

define internal i64 @word(ptr %plan, i64 %i) alwaysinline {
  %p = getelementptr i64, ptr %plan, i64 %i
  %v = load i64, ptr %p
  ret i64 %v
}

define internal ptr @lookup(ptr %plan, ptr %dict, i64 %i) alwaysinline {
  %p = getelementptr i64, ptr %plan, i64 %i
  %name = load ptr, ptr %p
  %obj = call ptr @PyDict_GetItem(ptr %dict, ptr %name)
  ret ptr %obj
}

define internal i64 @field(ptr %obj, i64 %off) alwaysinline {
  %p = getelementptr i8, ptr %obj, i64 %off
  %v = load i64, ptr %p
  ret i64 %v
}

define internal void @put(ptr %args, i64 %slot, i64 %v) alwaysinline {
  %p = getelementptr i64, ptr %args, i64 %slot
  store i64 %v, ptr %p
  ret void
}

; Buffer i's bytes [lo, hi) as written in the argument block. An empty buffer's are
; [0, 0), which overlap nothing: lo < 0 never holds unsigned.
define internal {i64, i64} @span(ptr %plan, ptr %args, i64 %i) alwaysinline {
  %e6 = mul i64 %i, 6
  %e0 = add i64 %e6, 8
  %e2 = add i64 %e0, 2
  %ps = call i64 @word(ptr %plan, i64 %e2)
  %e3 = add i64 %e0, 3
  %ls = call i64 @word(ptr %plan, i64 %e3)
  %e4 = add i64 %e0, 4
  %item = call i64 @word(ptr %plan, i64 %e4)
  %lo = call i64 @word(ptr %args, i64 %ps)
  %len = call i64 @word(ptr %args, i64 %ls)
  %bytes = mul i64 %len, %item
  %hi = add i64 %lo, %bytes
  %some = icmp ne i64 %len, 0
  %lo.s = select i1 %some, i64 %lo, i64 0
  %hi.s = select i1 %some, i64 %hi, i64 0
  %r0 = insertvalue {i64, i64} undef, i64 %lo.s, 0
  %r = insertvalue {i64, i64} %r0, i64 %hi.s, 1
  ret {i64, i64} %r
}

define i64 @cohort_fill_args(ptr %plan, ptr %dict, ptr %args, i64 %written) {
entry:
  %ovf = alloca i32
  %count = call i64 @word(ptr %plan, i64 0)
  %size = call i64 @PyDict_Size(ptr %dict)
  %same = icmp eq i64 %size, %count
  br i1 %same, label %start, label %fail
start:
  %nbuf = call i64 @word(ptr %plan, i64 1)
  %nf = call i64 @word(ptr %plan, i64 2)
  %ni = call i64 @word(ptr %plan, i64 3)
  %arrtype = call i64 @word(ptr %plan, i64 4)
  %floattype = call i64 @word(ptr %plan, i64 5)
  %inttype = call i64 @word(ptr %plan, i64 6)
  %skip = icmp ne i64 %written, 0
  br i1 %skip, label %ovl.start, label %buf.head

buf.head:
  %i = phi i64 [0, %start], [%i.next, %buf.store]
  %bmore = icmp slt i64 %i, %nbuf
  br i1 %bmore, label %buf.body, label %ovl.start
buf.body:
  %e6 = mul i64 %i, 6
  %e0 = add i64 %e6, 8
  %obj = call ptr @lookup(ptr %plan, ptr %dict, i64 %e0)
  %isnull = icmp eq ptr %obj, null
  br i1 %isnull, label %fail, label %buf.type
buf.type:
  %tp = call i64 @field(ptr %obj, i64 {type})
  %isarr = icmp eq i64 %tp, %arrtype
  br i1 %isarr, label %buf.descr, label %fail
buf.descr:
  %e1 = add i64 %e0, 1
  %want = call i64 @word(ptr %plan, i64 %e1)
  %descr = call i64 @field(ptr %obj, i64 {descr})
  %okd = icmp eq i64 %descr, %want
  br i1 %okd, label %buf.flags, label %fail
buf.flags:
  %fp = getelementptr i8, ptr %obj, i64 {flags}
  %flags = load i32, ptr %fp
  %cw = and i32 %flags, {cw}
  %okf = icmp eq i32 %cw, {cw}
  br i1 %okf, label %buf.dims, label %fail
buf.dims:
  %ndp = getelementptr i8, ptr %obj, i64 {nd}
  %nd32 = load i32, ptr %ndp
  %nd = sext i32 %nd32 to i64
  %dimsi = call i64 @field(ptr %obj, i64 {dims})
  %dims = inttoptr i64 %dimsi to ptr
  br label %dim.head
dim.head:
  %j = phi i64 [0, %buf.dims], [%j.next, %dim.body]
  %n = phi i64 [1, %buf.dims], [%n.next, %dim.body]
  %dmore = icmp slt i64 %j, %nd
  br i1 %dmore, label %dim.body, label %buf.size
dim.body:
  %djp = getelementptr i64, ptr %dims, i64 %j
  %dj = load i64, ptr %djp
  %n.next = mul i64 %n, %dj
  %j.next = add i64 %j, 1
  br label %dim.head
buf.size:
  %big = icmp ugt i64 %n, 2147483647
  br i1 %big, label %fail, label %buf.store
buf.store:
  %data = call i64 @field(ptr %obj, i64 {data})
  %e2 = add i64 %e0, 2
  %ps = call i64 @word(ptr %plan, i64 %e2)
  %e3 = add i64 %e0, 3
  %ls = call i64 @word(ptr %plan, i64 %e3)
  call void @put(ptr %args, i64 %ps, i64 %data)
  call void @put(ptr %args, i64 %ls, i64 %n)
  %i.next = add i64 %i, 1
  br label %buf.head

ovl.start:
  br label %ovl.a
ovl.a:
  %a = phi i64 [0, %ovl.start], [%a.next, %ovl.anext]
  %amore = icmp slt i64 %a, %nbuf
  br i1 %amore, label %ovl.abody, label %f.start
ovl.abody:
  %as = call {i64, i64} @span(ptr %plan, ptr %args, i64 %a)
  %alo = extractvalue {i64, i64} %as, 0
  %ahi = extractvalue {i64, i64} %as, 1
  %a.next = add i64 %a, 1
  br label %ovl.b
ovl.b:
  %b = phi i64 [%a.next, %ovl.abody], [%b.next, %ovl.bbody]
  %bmore2 = icmp slt i64 %b, %nbuf
  br i1 %bmore2, label %ovl.bbody, label %ovl.anext
ovl.bbody:
  %bs = call {i64, i64} @span(ptr %plan, ptr %args, i64 %b)
  %blo = extractvalue {i64, i64} %bs, 0
  %bhi = extractvalue {i64, i64} %bs, 1
  %o1 = icmp ult i64 %alo, %bhi
  %o2 = icmp ult i64 %blo, %ahi
  %overlap = and i1 %o1, %o2
  %b.next = add i64 %b, 1
  br i1 %overlap, label %fail, label %ovl.b
ovl.anext:
  br label %ovl.a

f.start:
  %fb6 = mul i64 %nbuf, 6
  %fbase = add i64 %fb6, 8
  br label %f.head
f.head:
  %k = phi i64 [0, %f.start], [%k.next, %f.store]
  %fmore = icmp slt i64 %k, %nf
  br i1 %fmore, label %f.body, label %i.start
f.body:
  %fe2 = mul i64 %k, 2
  %fe0 = add i64 %fbase, %fe2
  %fobj = call ptr @lookup(ptr %plan, ptr %dict, i64 %fe0)
  %fnull = icmp eq ptr %fobj, null
  br i1 %fnull, label %fail, label %f.type
f.type:
  %ftp = call i64 @field(ptr %fobj, i64 8)
  %isfloat = icmp eq i64 %ftp, %floattype
  br i1 %isfloat, label %f.value, label %fail
f.value:
  %vp = getelementptr i8, ptr %fobj, i64 16
  %v = load double, ptr %vp
  %f = fptrunc double %v to float
  %isnan = fcmp uno double %v, %v
  %fa = call float @llvm.fabs.f32(float %f)
  %finf = fcmp oeq float %fa, 0x7FF0000000000000
  %va = call double @llvm.fabs.f64(double %v)
  %vfin = fcmp one double %va, 0x7FF0000000000000
  %ovfl = and i1 %finf, %vfin
  %odd = or i1 %isnan, %ovfl
  br i1 %odd, label %fail, label %f.store
f.store:
  %bits = bitcast float %f to i32
  %bits64 = zext i32 %bits to i64
  %fe1 = add i64 %fe0, 1
  %fslot = call i64 @word(ptr %plan, i64 %fe1)
  call void @put(ptr %args, i64 %fslot, i64 %bits64)
  %k.next = add i64 %k, 1
  br label %f.head

i.start:
  %nf2 = mul i64 %nf, 2
  %ibase = add i64 %fbase, %nf2
  br label %i.head
i.head:
  %m = phi i64 [0, %i.start], [%m.next, %i.store]
  %imore = icmp slt i64 %m, %ni
  br i1 %imore, label %i.body, label %done
i.body:
  %ie4 = mul i64 %m, 4
  %ie0 = add i64 %ibase, %ie4
  %iobj = call ptr @lookup(ptr %plan, ptr %dict, i64 %ie0)
  %inull = icmp eq ptr %iobj, null
  br i1 %inull, label %fail, label %i.type
i.type:
  %itp = call i64 @field(ptr %iobj, i64 8)
  %isint = icmp eq i64 %itp, %inttype
  br i1 %isint, label %i.value, label %fail
i.value:
  store i32 0, ptr %ovf
  %iv = call i64 @PyLong_AsLongLongAndOverflow(ptr %iobj, ptr %ovf)
  %o = load i32, ptr %ovf
  %ie2 = add i64 %ie0, 2
  %lo = call i64 @word(ptr %plan, i64 %ie2)
  %ie3 = add i64 %ie0, 3
  %hi = call i64 @word(ptr %plan, i64 %ie3)
  %ovfn = icmp ne i32 %o, 0
  %below = icmp slt i64 %iv, %lo
  %above = icmp sgt i64 %iv, %hi
  %out1 = or i1 %ovfn, %below
  %out = or i1 %out1, %above
  br i1 %out, label %fail, label %i.store
i.store:
  %ibits = and i64 %iv, 4294967295
  %ie1 = add i64 %ie0, 1
  %islot = call i64 @word(ptr %plan, i64 %ie1)
  call void @put(ptr %args, i64 %islot, i64 %ibits)
  %m.next = add i64 %m, 1
  br label %i.head

done:
  ret i64 0
fail:
  ret i64 1
}
"""

_native: dict = {}
_native_lock = threading.Lock()


def _native_fill():
    """The native fill, compiled at the first launch that can use it (None where the
    object layouts were not confirmed)."""
    if "fn" in _native or not _NATIVE_OK:
        return _native.get("fn")
    with _native_lock:
        if "fn" not in _native:
            text = _IR.replace("{cw}", str(_CW))
            for name, off in _OFFSETS.items():
                text = text.replace("{" + name + "}", str(off))
            try:
                linked = jit.compile_module(text, ["cohort_fill_args"])
            except Exception:     # e.g. the C API's symbols not exported by this Python: the Python fill
                _native["fn"] = None
                return None
            _native["keep"] = linked
            # PYFUNCTYPE keeps the GIL: the function reads Python objects and calls the C API
            _native["fn"] = ctypes.PYFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.c_int64)(linked.addresses["cohort_fill_args"])
    return _native["fn"]


# ------------------------------------------------------------ the plan

def f32_bits(x) -> int:
    """A Python number's f32 bits: one rounding to nearest even (OverflowError past f32)."""
    return _U32.unpack(_F32.pack(x))[0]


def scalar_bits(dtype: DType, value) -> int:
    """The 32 bits a scalar parameter's slot holds: an f32's bit pattern (a NumPy float32's
    exactly, NaN payloads included; a Python number rounded once), an integer's low 32 bits."""
    if dtype is DType.F32:
        return int(value.view(np.uint32)) if type(value) is np.float32 else f32_bits(value)
    return int(value) & 0xFFFFFFFF


class LaunchPlan:
    """Per specialised kernel, once: where each parameter goes in the argument block and
    what it must be. The block's one writer (entry ABI, context.py): `fill` from a dict of
    arguments it checks itself (the quick path, module notes), `write` from values already
    checked (check_args's, or cohort.torch's tensors as addresses). Each writes n, the block
    range and a bounds proof to redo through `_put_launch`, buffers and scalars through
    `_put_buffers`/`_put_scalars` (the native fill is the same writer in LLVM IR, reading
    the same table). A block refilled for a launch of the shape it holds (n, lengths,
    scalars) needs only new addresses, at `pointer_slots` (cohort.torch's pooled blocks: the
    bounds proof reads no pointer)."""

    def __init__(self, k: Kernel):
        slots = abi_slots(k)
        written = written_buffers(k)
        self.count = len(k.params)
        self.block = k.block
        self.nmax = I32_MAX - k.block
        bufs, f32s, ints = [], [], []
        for p in k.params:
            if p.kind is ParamKind.BUFFER:
                bufs.append((p.name, *slots[p.name], p.dtype.np, p.dtype.np.itemsize, p.name in written))
            elif p.kind is ParamKind.SCALAR and p.dtype is DType.F32:
                f32s.append((p.name, slots[p.name][0]))
            elif p.kind is ParamKind.SCALAR and p.dtype in (DType.I32, DType.U32):
                lo, hi = (I32_MIN, I32_MAX) if p.dtype is DType.I32 else (0, U32_MAX)
                ints.append((p.name, slots[p.name][0], lo, hi))
            else:
                self.count = -1   # a parameter the quick path does not know: always the full check
        self.bufs, self.f32s, self.ints = tuple(bufs), tuple(f32s), tuple(ints)
        self.buffer_names = tuple(b[0] for b in bufs)
        self.buffer_slots = tuple((ps, ls) for _, ps, ls, *_ in bufs)       # parameter order
        self.pointer_slots = tuple(ps for ps, _ in self.buffer_slots)
        scalars = [p for p in k.params if p.kind is ParamKind.SCALAR]
        self.scalar_names = tuple(p.name for p in scalars)
        self.scalar_slots = tuple((slots[p.name][0], p.dtype) for p in scalars)
        self.probe = self.buffer_names[0] if bufs else None
        # the table holds the addresses of these objects; bufs, f32s and ints keep them alive
        self.table, self.native, self._fn, self._tensors = None, 0, None, None
        if self.count >= 0 and _NATIVE_OK:
            words = [self.count, len(bufs), len(f32s), len(ints), id(np.ndarray), id(float), id(int), 0]
            for name, ps, ls, want, itemsize, _ in bufs:
                words += [id(name), id(want), ps, ls, itemsize, 0]
            for name, slot in f32s:
                words += [id(name), slot]
            for name, slot, lo, hi in ints:
                words += [id(name), slot, lo, hi]
            self.table = np.array(words, np.int64)
            self.native = self.table.ctypes.data

    # ---- the writer

    def _put_launch(self, p, n: int):
        """n, the block range [0, nblocks) and a bounds proof to redo (context.py)."""
        nblocks = n // self.block if inject.runtime_planted("launch_nblocks_floor") else -(-n // self.block)
        mv = p._mv
        mv[SLOT_N] = n
        mv[SLOT_BEGIN] = 0
        mv[SLOT_END] = nblocks
        mv[SLOT_PROOF] = 0     # a new launch: its bounds are proven again (context.py)
        p.n, p.nblocks = n, nblocks

    def _put_buffers(self, mv, buffers):
        """Each buffer's (address, length), in parameter order."""
        for (ps, ls), (address, length) in zip(self.buffer_slots, buffers):
            mv[ps] = address
            mv[ls] = length

    def _put_scalars(self, mv, values):
        """Each scalar's value, in parameter order (scalar_bits)."""
        for (slot, dtype), value in zip(self.scalar_slots, values):
            mv[slot] = scalar_bits(dtype, value)

    def write(self, p, n: int, buffers, scalars):
        """Write a launch whose arguments are already checked: `buffers` each buffer's
        (address, length) and `scalars` each scalar's value, both in parameter order."""
        self._put_buffers(p._mv, buffers)
        self._put_scalars(p._mv, scalars)
        self._put_launch(p, n)

    def fill(self, p, n: int, args: dict) -> bool:
        """Write one launch into p's block (n already checked); False: not vouched for."""
        fn = self._fn
        if fn is None and self.native:
            fn = self._fn = _native_fill()
            if fn is None:
                self.native = 0
        buffers = None
        if fn is not None and type(args) is dict:
            probe = self.probe
            if probe is None or type(args.get(probe)) is np.ndarray:
                if fn(self.native, id(args), p.address, 0) == 0:
                    buffers = {}
                    for name in self.buffer_names:
                        buffers[name] = args[name]
            else:   # torch's launches: the tensors in Python, the rest natively
                buffers = self._fill_tensors(p, args, fn)
        if buffers is None:
            buffers = self._fill_python(p, args)
            if buffers is None:
                return False
        if p.n != n:
            p.auto_choice = None   # auto's choice is per launch size
        self._put_launch(p, n)
        p.buffers = buffers
        code = p.origin   # a new launch gets its bounds proof again (a fallback was the last launch's)
        if p.code is not code:
            p.code, p.fallback = code, None
        if p.entry != code.entry:
            p.entry, p.entry_fn = code.entry, code.entry_fn
        return True

    def _fill_tensors(self, p, args: dict, fn):
        """Every buffer a plain CPU tensor: their slots from Python (torch's accessors), then
        the native fill for the overlap test and the scalars. The buffers by name, or None."""
        tensors = self._tensors
        if tensors is None:
            tensor = _torch_state.get("tensor")
            if tensor is None:
                if type(args.get(self.probe)).__module__ != "torch":
                    return None
                tensor = _torch_seen()
            tdtypes = _torch_state["dtypes"]
            tensors = self._tensors = (tensor, tuple((name, tdtypes.get(want), written)
                                                     for name, _, _, want, _, written in self.bufs))
        tensor, bufs = tensors
        buffers, placed = {}, []
        for name, tdtype, written in bufs:
            v = args[name]
            if (type(v) is not tensor or v.dtype is not tdtype or not v.is_cpu or not v.is_contiguous()
                    or v.is_neg() or (written and v.requires_grad)):
                return None
            size = v.numel()
            if size > I32_MAX:
                return None
            placed.append((v.data_ptr(), size))
            buffers[name] = v
        self._put_buffers(p._mv, placed)
        return buffers if fn(self.native, id(args), p.address, 1) == 0 else None

    def _fill_python(self, p, args: dict):
        """The same fill in Python, for torch tensors and where the native one is not
        available: the buffers by name, or None."""
        if len(args) != self.count:
            return None
        buffers, placed, spans = {}, [], []
        views = False    # an ndarray that does not own its memory, or a tensor: may overlap another
        tensor = _torch_state.get("tensor")
        tdtypes = _torch_state.get("dtypes")
        for name, slot, lslot, want, itemsize, written in self.bufs:
            v = args[name]
            t = type(v)
            if t is np.ndarray:
                if v.dtype is not want:
                    return None
                addr, flags = _header(v)
                if flags & _CW != _CW:
                    return None
                if not flags & _OWNDATA:
                    views = True
                size = v.size
            else:
                if tensor is None and t.__module__ == "torch":
                    tensor = _torch_seen()
                    tdtypes = _torch_state["dtypes"]
                if (t is not tensor or v.dtype is not tdtypes.get(want) or not v.is_cpu
                        or not v.is_contiguous() or v.is_neg() or (written and v.requires_grad)):
                    return None
                addr, size = v.data_ptr(), v.numel()
                views = True
            if size > I32_MAX:
                return None
            buffers[name] = v
            placed.append((addr, size))
            if size:
                spans.append((addr, addr + size * itemsize))
        if len(spans) > 1:
            if views:
                # sorted by start, some two spans overlap iff some neighbours do
                spans.sort()
                for i in range(1, len(spans)):
                    if spans[i][0] < spans[i - 1][1]:
                        return None    # check_args names the pair
            elif len({s[0] for s in spans}) < len(spans):
                return None   # arrays owning their memory overlap only when one is passed twice
        for name, _ in self.f32s:
            v = args[name]
            if type(v) not in _F32_TYPES or v != v:   # a NaN's payload: NumPy's conversion decides
                return None
            if type(v) is not np.float32:
                f32_bits(v)       # OverflowError past f32: check_args decides
        for name, _, lo, hi in self.ints:
            v = args[name]
            if type(v) not in _INT_TYPES or not lo <= int(v) <= hi:
                return None
        self._put_buffers(p._mv, placed)
        self._put_scalars(p._mv, [args[name] for name in self.scalar_names])
        return buffers
