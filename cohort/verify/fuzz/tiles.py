"""One tile program (verify/gen/tiles.py) checked: cohort.triton's reference against its native
build, bit for bit, at each of the program's sizes (DESIGN §10's contract for check mode).

The program's source goes through cohort.triton's frontend as a user's kernel does
(`triton.jit` on source text registered with linecache, then `launch.build`), so the fuzzer
needs the `triton` extra; `TritonMissing` says so. The reference runs on copies of the
buffers, native on the buffers; every buffer (inputs, outputs and their guard elements) is
then compared by its bits. Outcomes: `ok`, a `Mismatch` (bits differ, or only one side
failed), `discarded` (the reference itself rejected the launch: a generator fault, reported
by the campaign and required to be 0 by tests/test_fuzz_tiles.py).
"""
from __future__ import annotations

import linecache
from dataclasses import dataclass, replace

import numpy as np

from ... import knobs
from ..checksum import checksum, differing
from ..gen.tiles import IN_TYPES, Size, TileProgram, extent, input_extent

NP_OF = {"f32": np.float32, "i32": np.int32, "bf16": np.uint16, "f16": np.float16}


class TritonMissing(RuntimeError):
    """The tile family compiles Triton source: it needs the `triton` extra."""


@dataclass(frozen=True)
class Mismatch:
    size: Size
    what: str                   # "bits", "native error", "reference error only"
    buffer: str                 # the first differing buffer, or "" for an error
    kind: str                   # the piece kind that writes it ("" for an input or an error)
    detail: str
    ref_checksum: str = ""
    native_checksum: str = ""

    @property
    def bin(self) -> str:
        return f"{self.kind or self.buffer or 'program'}:{self.what.replace(' ', '-')}"


def require_triton():
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except ImportError:
        raise TritonMissing("the tile-program family compiles Triton kernels: it needs the `triton` extra "
                            "(pip install 'cohort[triton]')") from None


_KERNELS: dict = {}


def kernel(prog: TileProgram):
    """The program's `@triton.jit` function (source registered with linecache, so
    inspect/the frontend read it as a file's)."""
    require_triton()
    src = prog.source()
    got = _KERNELS.get(src)
    if got is None:
        fname = f"<cohort tile program {len(_KERNELS)}>"
        linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
        glb = {"__name__": f"cohort_tile_program_{len(_KERNELS)}"}
        exec(compile(src, fname, "exec"), glb)
        got = _KERNELS[src] = glb["tile_program"]
        if len(_KERNELS) > 512:         # a long campaign: keep the cache bounded
            _KERNELS.pop(next(iter(_KERNELS)))
    return got


def _fill(rng: np.random.Generator, n: int, dt: str) -> np.ndarray:
    """Values where lowerings differ: signed zeros, infinities, NaN, subnormals, ties, edges."""
    if dt == "i32":
        pick = rng.integers(0, 4, n)
        full = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64)
        small = rng.integers(-9, 10, n)
        edge = rng.choice(np.array([-2 ** 31, 2 ** 31 - 1, -1, 0, 1, 2 ** 30], np.int64), n)
        return np.where(pick == 0, full, np.where(pick == 3, edge, small)).astype(np.int32)
    pick = rng.integers(0, 10, n)
    normal = rng.standard_normal(n) * 3.0
    ints = rng.integers(-4, 5, n).astype(np.float64)
    special = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e-39, 3.0e38, 0.5, 1.0]), n)
    wide = rng.uniform(-1e6, 1e6, n)
    x = np.where(pick < 5, normal, np.where(pick < 7, ints, np.where(pick < 8, special, wide))).astype(np.float32)
    if dt == "f32":
        return x
    if dt == "f16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16)
    return (x.view(np.uint32) >> 16).astype(np.uint16) ^ rng.integers(0, 2, n, dtype=np.uint16)   # bf16 bits


def arguments(prog: TileProgram, z: Size, seed: int) -> tuple:
    """(params, consts, {name: (array, Dt)}, scalars) of a launch at size z, as Triton
    specialises: an int argument equal to 1 is a compile-time constant."""
    from ...triton.tir import TT, Dt, Ptr
    dts = {"f32": Dt.F32, "i32": Dt.I32, "bf16": Dt.BF16, "f16": Dt.F16}
    rng = np.random.default_rng(seed)
    params, consts, arrays, scalars = [], [], {}, {}
    n_in = input_extent(prog, z)
    for name, dt in IN_TYPES:
        params.append((name, TT(Ptr(dts[dt]))))
        a = _fill(rng, n_in, dt)
        if name == "xd":                # the dot's operands (tile_pieces._dot): infinities but no NaN
            a[np.isnan(a)] = 0.5
        arrays[name] = (a, dts[dt])
    for o in prog.outs:
        params.append((o.name, TT(Ptr(dts[o.dtype]))))
        arrays[o.name] = (_fill(rng, extent(prog, o, z), o.dtype), dts[o.dtype])
    for name in ("M", "N", "S", "K", "T"):
        v = getattr(z, name)
        if v == 1:
            consts.append((name, 1))
        else:
            params.append((name, TT(Dt.I32)))
            scalars[name] = np.int32(v)
    bm, bn, bk = prog.blocks
    consts += [("BM", bm), ("BN", bn), ("BK", bk)]
    return params, consts, arrays, scalars


def switches(seed: int) -> dict:
    """The target-dependent lowering switches of a launch (COHORT_FMA: llvm.fma or the exact
    software sequence; COHORT_F16: F16C or integer conversions), drawn from its input seed as
    the thread family draws them per program (verify/execute.lowering_switches), so one host
    runs both sides; a switch the environment sets stands."""
    out = {}
    for bit, (env, values) in ((1, (knobs.FMA.name, ("hardware", "software"))),
                               (2, (knobs.F16.name, ("hardware", "software")))):
        if knobs.KNOBS[env].raw() in (None, "auto"):
            out[env] = values[(seed >> bit) & 1]
    return out


def check_size(prog: TileProgram, z: Size, seed: int, strict_nan: bool = False, threads: int = None):
    """None when reference and native agree bit for bit at size z, else a Mismatch; the
    string "discarded" when the reference rejects the launch. Native runs the grid on the
    calling thread for even input seeds and on the backend's pool of 2 for odd ones (a program
    with atomics runs in program-id order either way), unless `threads` says."""
    threads = threads or 1 + seed % 2
    from ...triton import native
    from ...triton.errors import KernelRuntimeError
    from ...triton.frontend import Frontend
    from ...triton.interp import Buffer, Interpreter
    params, consts, arrays, scalars = arguments(prog, z, seed)
    tprog = Frontend(kernel(prog), params, consts).build()      # launch.build would keep it for the process's life
    with knobs.overridden(switches(seed)):
        native.compile_program(tprog)
    grid = prog.grid(z)
    ref = {k: Buffer(a.copy(), 0, dt) for k, (a, dt) in arrays.items()}
    nat = {k: Buffer(a.copy(), 0, dt) for k, (a, dt) in arrays.items()}
    try:
        Interpreter(tprog, ref, scalars, grid).run()
    except KernelRuntimeError:
        return "discarded"
    try:
        with knobs.overridden(switches(seed)):
            native.run(tprog, nat, scalars, grid, threads=threads)
    except KernelRuntimeError as e:
        return Mismatch(z, "native error", "", "", f"native failed where the reference ran: {e}")
    writer = {o.name: p.kind for p in prog.pieces for o in p.outs}
    nan_only = None
    for name in arrays:
        want, got = ref[name].flat, nat[name].flat
        u = np.dtype(f"u{got.itemsize}")
        bits = got.view(u) != want.view(u)
        if not bits.any():
            continue
        # DESIGN §3's one definition of agreeing: f32 NaNs equal whatever their bits
        # (refimpl.equality); the 16-bit storage types by their bits, NaN payloads included
        diff = np.flatnonzero(differing(got, want) if got.dtype == np.float32 else bits)
        what = "bits"
        if not diff.size:
            if not strict_nan:
                nan_only = nan_only or name
                continue
            diff, what = np.flatnonzero(bits), "nan bits"
        k = int(diff[0])
        return Mismatch(z, what, name, writer.get(name, ""),
                        f"`{name}` element {k}: native bits {int(got.view(u)[k]):#x}, reference bits "
                        f"{int(want.view(u)[k]):#x}; {diff.size} element(s) differ",
                        checksum(want), checksum(got))
    return NanOnly(name=nan_only) if nan_only else None


@dataclass(frozen=True)
class NanOnly:
    """The builds agree but for the bits of f32 NaNs (DESIGN §3 counts them equal; cohort.triton's
    check mode compares them): counted by the campaign, a failure only with strict_nan."""
    name: str


def check(prog: TileProgram, strict_nan: bool = False):
    """The first size at which the program's builds disagree (a Mismatch), else "discarded" if
    the reference rejected a launch, else a NanOnly if f32 NaN bits alone differed, else None."""
    other = None
    for i, z in enumerate(prog.sizes):
        r = check_size(prog, z, prog.seed * 7 + i, strict_nan)
        if isinstance(r, Mismatch):
            return r
        if r == "discarded" or (r is not None and other is None):
            other = r
    return other


def _still(prog: TileProgram, z: Size, seed: int, bin_: str, strict_nan: bool):
    try:
        r = check_size(prog, z, seed, strict_nan)
    except Exception:           # a shrink step the frontend refuses is not the same failure
        return None
    return r if isinstance(r, Mismatch) and r.bin == bin_ else None


def shrink(prog: TileProgram, m: Mismatch, budget: int = 60, strict_nan: bool = False) -> tuple:
    """(program, mismatch): fewer pieces, then smaller sizes, keeping the same bin. Each step is
    one reference + native run; `budget` bounds them."""
    seed = prog.seed * 7 + prog.sizes.index(m.size)
    prog = replace(prog, sizes=(m.size,))
    steps = 0
    i = 0
    while i < len(prog.pieces) and len(prog.pieces) > 1 and steps < budget:
        cand = prog.without(i)
        steps += 1
        r = _still(cand, m.size, seed, m.bin, strict_nan)
        if r is not None:
            prog, m = cand, r
        else:
            i += 1
    changed = True
    while changed and steps < budget:       # passes over the sizes until one changes nothing
        changed = False
        for field in ("M", "N", "K", "T", "S"):
            for v in sorted({0, 1, 2, 3, getattr(m.size, field) // 2, getattr(m.size, field) - 1}):
                if steps >= budget or not 0 <= v < getattr(m.size, field):
                    continue
                z = replace(m.size, **{field: v})
                if z.S < z.N or z.M < 1 or z.N < 1 or z.K < 1:
                    continue
                steps += 1
                r = _still(replace(prog, sizes=(z,)), z, seed, m.bin, strict_nan)
                if r is not None:
                    prog, m, changed = replace(prog, sizes=(z,)), r, True
                    break
    return prog, m
