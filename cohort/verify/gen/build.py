"""Whole launches: the kernel builder, `cases()` (Hypothesis) and `generate(seed)`."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ...refimpl.ir import For, Kernel, Op, Param, ParamKind, Private, PStore, binary, cast, const, param, var
from .base import BOOL, F32, I32, SPECIAL_F32, SPECIAL_I32, SPECIAL_U32, U32, Core, LoopRecord, PrivateArray
from .boundary import Boundary
from .case import BufferSpec, Case
from .collectives import Collectives
from .coop import Cooperative
from .draws import HypothesisDraws, SeededDraws
from .index import Indices
from .plant import Plants
from .steer import SHAPES, not_idempotent
from .stmts import Statements
from .storage import Storage

LAUNCH_SIZES = (33, 31, 1, 257, 17, 100, 64, 8, 130, 200)   # weighted towards the odd sizes with tails
SIZE_WEIGHTS = (3, 3, 1, 2, 1, 1, 1, 1, 1, 1)
BLOCKS = (32, 8, 16, 64, 128)
BLOCK_WEIGHTS = (12, 6, 6, 2, 1)      # 64, 128: wide interleaves compile slowly (20+ s per variant seen)
SOURCE_PERCENT = 25        # programs that go through Python source and the frontend


# programs with an access at the edge of its buffer (boundary.py): on it or one short (they run), and
# one past (expected-error programs: only the error is compared, so they are kept small and cheap:
# a third of the statements, at most one collective, no coverage plants, no cooperative section)
EDGE_PERCENT, PAST_PERCENT = 20, 25
ATOMIC_SHAPES = ("atomic:f32-edge", "atomic:shared-edge")
PROBE_SHAPES = ("wrap:loop", "guard:loaded", "store:either-side", "loop:const-var", "loop:prefix",
                "private:store-masked", "storage:half") + ATOMIC_SHAPES
# small probes made besides a program's aim while the campaign lacks them: with one, a loaded
# machine's minute (8-14 programs, a load of 10-17 on two cores) met each probe shape once or
# twice, and a probe's plant shows in a half to three quarters of its programs
PROBES_BESIDES = 3
AIM_PAST_PERCENT = 50      # while a steered campaign lacks a one-past shape (steer.SHAPES): at 30%, two
                           # to four were still missing after 30 programs on 5 of 6 draw sequences
                           # (tests/test_gen_shapes.py; with never-made shapes first, base.Core.aim)
NEAR_PERCENT = 40         # launch sizes k*B + d: just around block and packet multiples, several blocks
NEAR_OFFSETS = (-1, 0, 1, -4, 4, -8, 8, -3, 3, -5, 5, -7, 7, -9, 9, -16, 16, 2, -2)


class KernelBuilder(Boundary, Cooperative, Plants, Statements, Collectives, Storage, Indices, Core):
    """Builds one kernel (see the package docstring for what it guarantees)."""
    stress = False             # a stress program (fuzz/stress.py): large launch, small inputs
    aimed = None               # the one rare shape (steer.SHAPES, not one-past) this program is made for
    also = ()                  # and up to PROBES_BESIDES of the small probes (PROBE_SHAPES) still missing
    wanted = frozenset()       # {aimed, *also}
    rerun = False              # aiming at rmw:multi-task


def _private_decls(gen: KernelBuilder, body: list):
    """Private arrays, declared at the top, most of them filled with per-thread values."""
    inits = []
    count = gen.weighted([(2, 0), (3, 1), (2, 2)])
    needs = ("structure:private", "op:PLOAD", "statement:P", "access:p", "effect:cohort", "effect:thread")
    if count == 0 and (gen.steer is not None and any(c.startswith(needs) for c in gen.steer.missing)
                       or "private:store-masked" in gen.wanted):
        count = 1                          # a steered plant or probe needs one
    for k in range(count):
        dt = gen.weighted([(3, F32), (2, I32), (1, U32), (1, BOOL)])
        size = gen.int(1, 9)
        name = f"p{k}"
        size_e = const(size, I32)
        if gen.consts and gen.maybe(30):
            c = sorted(gen.consts)[0]
            size_e = param(c, I32) + const(size, I32)
            size += gen.consts[c]
        gen.privates.append(PrivateArray(name, dt, size))
        body.append(Private(name, dt, size_e))
        if gen.maybe(70):         # fill it with per-thread values: for j in range(size): p[j] = f(j, g)
            inits.append((gen.privates[-1], size_e))
    for p, size_e in inits:
        j = gen.fresh("j")
        gen.loops.append(LoopRecord(j, 0, p.size - 1, True, False))
        gen.loopvars.add(j)
        gen.vtypes[j] = I32
        gen.defined.add(j)
        value = gen.expr(p.dtype, 1)
        if gen.maybe(80):        # distinct in every thread and element: layouts cannot be confused
            mix = var(j, I32) * 7 + gen.g()
            if p.dtype is BOOL:
                value = binary(Op.XOR, value, binary(Op.EQ, binary(Op.AND, mix, gen.ci(1)), gen.ci(0)))
            else:
                value = binary(Op.ADD, value, cast(mix, p.dtype))
        gen.defined.discard(j)
        gen.loops.pop()
        body.append(For(j, const(0, I32), size_e, const(1, I32), (PStore(p.name, var(j, I32), value),)))


def _missing(gen, prefix) -> bool:
    """Whether the steering still misses a category starting with `prefix` (a str or tuple)."""
    return gen.steer is not None and any(c.startswith(prefix) for c in gen.steer.missing)


def build_kernel(gen: KernelBuilder, max_stmts: int, edge=False):
    """(kernel, buffers, scalar types, consts) for a fresh builder. `edge`: None, "edge" or
    "past" (an access at its buffer's edge, boundary.py; False: drawn here)."""
    # Blocks above 32 get proportionally less code: the packet lowering runs up to block // lanes
    # packets side by side (interleave=auto), and compile time grows with that width.
    # (issue 28: to the power 1.5, the programs of blocks of 64 and 128 were two thirds of the CPU time)
    scale = min(1.0, (32 / gen.B) ** 1.5)
    gen.stmt_budget = max(4, round(max_stmts * scale))
    gen.node_budget = max(40, round(gen.node_budget * scale))
    big = 4 * gen.npad + 16 if not gen.stress else 64     # (stress: a million threads, small inputs)
    sp = (3 if gen.focused("collective") else 1) * gen.boost("input:nan", "input:inf", "input:-0", "input:subnormal",
                                                              "input:huge")

    def profile(f32=False):
        return gen.weighted([(3, "data"), (3, "finite"), (2 * sp, "special"), (2 * sp if f32 else 0, "nanzero")])
    specs = [BufferSpec("x0", F32, big if gen.maybe(80) else gen.int(1, 40), profile(f32=True))]
    if gen.maybe(60):   # an f32 input of ordinary values: where rounding differences show
        specs.append(BufferSpec("x1", F32, big if gen.maybe(80) else gen.int(1, 40), "finite"))
    for name, dt, pct in (("xi", I32, 60), ("xu", U32, 35), ("xb", BOOL, 25)):
        if gen.maybe(pct):
            fill = profile() if dt is not BOOL else gen.weighted([(2, "data"), (3, "bytes")])
            specs.append(BufferSpec(name, dt, big if gen.maybe(70) else gen.int(1, 40), fill))
    if edge not in ("past", "stress") and (gen.maybe(25) or "storage:half" in gen.wanted):
        # an f16 or bf16 input, read wherever an f32 one is (base.Core.leaf; storage.py)
        specs.append(BufferSpec("xh", gen.storage_dtype(), big if gen.maybe(80) else gen.int(1, 40), profile()))
    gen.inputs = specs
    if gen.maybe(35):
        gen.perm = BufferSpec("perm", I32, gen.npad, "perm")
    # outputs: always one f32 and one integer output, sometimes a bool one
    # a store group of a shape the campaign lacks (steer.SHAPES) needs an output of 3 or 4 slots side by side
    groups = [gen.aimed] if gen.aimed in ("group:unordered", "group:sign-slip", "group:offset") else []
    shifted = gen.aimed == "group:offset"
    gen.outputs = [gen.make_output("y0", F32, interleave=(2 if shifted else 3) + gen.int(0, 1 + shifted)
                                   if groups else None, offset=shifted or None),
                   gen.make_output("y1", gen.pick([I32, U32]))]
    if gen.maybe(20):
        gen.outputs.append(gen.make_output("y2", BOOL))
    if gen.maybe(25):
        gen.outputs.append(gen.make_output("y3", F32))
    if gen.aimed == "store:either-side":    # two slots at g and g + M: both of the probe's pairs
        either = gen.make_output("y4", F32)
        either.slots, either.interleaved, either.forms = 2, False, [("id", ())] * 2
        gen.outputs.append(either)
    # scalars and constants
    for name, dt, pct in (("sf", F32, 50), ("si", I32, 50), ("su", U32, 25)):
        if gen.maybe(pct):
            gen.scalars[name] = dt
    if gen.maybe(40):
        gen.consts["C0"] = gen.int(0, 5)
    body: list = []
    gen.atomic_buffers = []
    gen.edge_outputs = []
    _private_decls(gen, body)
    # phases separated by collectives
    ncoll = gen.weighted([(0, 0), (2, 1), (3, 2), (3, 3)] if gen.focused("collective") else
                         [(2, 0), (4, 1), (2, 2), (1, 3)])
    if ncoll == 0 and (_missing(gen, "structure:collective") or _missing(gen, "statement:Collective")
                       or _missing(gen, "structure:read:neighbour")):
        ncoll = 1
    if edge is False:
        edge = draw_edge(gen)
    groups = groups if edge != "past" else []
    edge_phase = gen.int(0, ncoll) if edge else None
    if edge == "past":             # small: at most one collective, no plants, no cooperative section
        gen.stmt_budget = max(3, gen.stmt_budget // 3)
        gen.node_budget = max(30, gen.node_budget // 2)
        ncoll = min(ncoll, 1)
        edge_phase = gen.int(0, ncoll)
    # the cooperative pieces are drawn now: they make every thread of the last block exist
    # (DESIGN §2), which the edge accesses below must count (boundary.py)
    coop = ("statement:Barrier", "statement:Shared", "statement:SStore", "statement:Atomic", "op:SLOAD",
            "structure:barrier", "structure:atomic")
    want_edges = gen.wanted & set(ATOMIC_SHAPES)
    plan_edges = edge not in ("past", "stress") and bool(want_edges or gen.maybe(6))
    plan_section = edge not in ("past", "stress") and (gen.maybe(40) or _missing(gen, coop))
    if plan_edges or plan_section or edge == "stress":
        gen.threads = -(-gen.n // gen.B) * gen.B
    for phase in range(ncoll + 1):
        gen.phase = phase
        gen.exchange = set()
        gen.stored_at = []
        if phase > 0:
            for o in gen.outputs:
                for j in range(o.slots):
                    if gen.maybe(35):
                        gen.exchange.add((o, j))
            if not gen.exchange and phase == ncoll and _missing(gen, "structure:read:neighbour"):
                o = gen.pick(gen.outputs)
                gen.exchange.add((o, gen.int(0, o.slots - 1)))
        if phase == 0 and groups:          # a store group of the shape the campaign lacks, at the top
            g = gen.group_store(1, aim=gen.pick(groups)[6:])
            body.extend(g or ())
        if phase == 0 and edge != "past" and ("wrap:loop" in gen.wanted or gen.maybe(4)):
            body.extend(gen.wrap_probe())        # on purpose while a campaign lacks it, else 4%
        if phase == 0 and edge != "past" and ("guard:loaded" in gen.wanted or gen.maybe(10)):
            body.extend(gen.guard_probe())       # a loaded index behind its guards (bounds.py)
        if phase == 0 and edge != "past" and ("private:store-masked" in gen.wanted or gen.maybe(5)):
            body.extend(gen.private_probe())       # a private store with lanes off, read back
        if phase == 0 and edge != "past" and ("loop:const-var" in gen.wanted or gen.maybe(4)):
            body.extend(gen.const_loop_probe())    # constant bounds through top-level variables
        if phase == 0 and edge != "past" and ("loop:prefix" in gen.wanted or gen.maybe(5)):
            body.extend(gen.prefix_probe())        # a per-thread start the packet's lanes leave apart
        if phase == 0 and edge != "past" and ("store:either-side" in gen.wanted or gen.maybe(3)):
            body.extend(gen.either_side_probe())   # if/else storing to one element (one store)
        if phase == 0 and edge not in ("past", "stress") and ("storage:half" in gen.wanted
                                                              or gen.maybe(8)):
            body.extend(gen.storage_probe())       # f16/bf16 stores and a read-back
        body.extend(gen.stmts(0))
        if phase == edge_phase and edge != "stress":
            body.extend(gen.boundary(edge == "past"))
        if phase < ncoll:
            body.append(gen.collective())
        elif edge is None or edge == "edge":
            if gen.rerun:          # a store that reads its own address: running a block twice shows
                rmw = gen.src.span(gen.plant, "structure:store:read-modify-write")
                body.extend([rmw] if rmw is not None else [])
            body.extend(gen.plants(body))
    if edge == "stress":         # fuzz/stress.py: integer atomics on global buffers, always
        body.extend(gen.coop_stress())
    elif edge != "past":
        if plan_edges:           # on purpose while a campaign lacks it, else in 6% of programs (either kind)
            for shared in sorted({s == "atomic:shared-edge" for s in want_edges} or {gen.maybe(50)}):
                body.extend(gen.coop_atomic_edges(shared))
        if plan_section:
            body.extend(gen.coop_section())
    body.extend(gen.epilogue())
    if gen.maybe(90):
        sink = gen.make_output("ys", U32)
        sink.slots, sink.interleaved, sink.forms = 1, False, sink.forms[:1]
        st_ = gen.sink(sink)
        if st_ is not None:
            gen.outputs.append(sink)
            body.append(st_)
    out_specs = [gen._out_spec(o) for o in gen.outputs]
    buffers = specs + ([gen.perm] if gen.perm is not None else []) + out_specs + gen.atomic_buffers + gen.edge_outputs
    params = [Param(b.name, ParamKind.BUFFER, b.dtype) for b in buffers]
    params += [Param(n_, ParamKind.SCALAR, dt) for n_, dt in gen.scalars.items()]
    params += [Param(n_, ParamKind.CONST, I32) for n_ in gen.consts]
    order = gen.src.permutation(len(params))
    params = [params[i] for i in order]
    kernel = Kernel("fz", tuple(params), tuple(body), gen.B)
    return kernel, buffers, dict(gen.scalars), dict(gen.consts)


def draw_edge(pick: Core):
    """None, "edge" or "past"; while a steered campaign lacks a one-past shape (steer.SHAPES),
    one-past programs are 50% (25% otherwise) and drawn first."""
    if pick.aims(*(s for s in SHAPES if s.startswith("past:"))):
        # first in the table: Hypothesis' draws lean towards a table's first entry (a third of
        # its programs were one past with "past" last at 50%, campaign seeds 0 and 1)
        return pick.weighted([(AIM_PAST_PERCENT, "past"), (100 - EDGE_PERCENT - AIM_PAST_PERCENT, None),
                              (EDGE_PERCENT, "edge")])
    return pick.weighted([(100 - EDGE_PERCENT - PAST_PERCENT, None), (EDGE_PERCENT, "edge"), (PAST_PERCENT, "past")])


def scalar_value(gen: Core, dt):
    """A value for a scalar parameter: special values half the time."""
    if dt is F32:
        return np.float32(gen.pick(SPECIAL_F32) if gen.maybe(50) else gen.src.f32_any())
    if dt is I32:
        return np.int32(gen.pick(SPECIAL_I32) if gen.maybe(50) else gen.int(-(2 ** 31), 2 ** 31 - 1))
    return np.uint32(gen.pick(SPECIAL_U32) if gen.maybe(50) else gen.int(0, 2 ** 32 - 1))


def _weights(sizes, weights) -> list:
    return list(weights[:len(sizes)]) + [1] * (len(sizes) - len(weights))


def build_case(source, max_stmts: int = 16, sizes=LAUNCH_SIZES, blocks=BLOCKS, steer=None,
               stress: bool = False) -> Case:
    """One case from a draw source (HypothesisDraws or SeededDraws). `stress`: a program with
    integer atomic updates of global buffers, no edge access, no plants (fuzz/stress.py)."""
    pick = Core(source, 1, 1, steer)
    edge = "stress" if stress else draw_edge(pick)
    n = pick.weighted(list(zip(_weights(sizes, SIZE_WEIGHTS), sizes)))
    # one-past programs are checked for their error only, which blocks of 64 and 128 (several CPU
    # seconds a build) add nothing to: their blocks are at most 32
    small = edge == "past" and min(blocks) <= 32
    bw = [(0 if small and b > 32 else w, b) for w, b in zip(_weights(blocks, BLOCK_WEIGHTS), blocks)]
    block = pick.weighted(bw)
    # one rare shape per program (one-past programs aim at theirs in boundary.py): a program made
    # for all of them at once was 30-50 statements and 6-15 CPU s under a campaign's first steering
    aimed = (pick.aim("rmw:multi-task", "group:unordered", "group:sign-slip", "wrap:loop", "guard:loaded",
                      "store:either-side", "atomic:f32-edge", "atomic:shared-edge", "group:offset",
                      "loop:const-var", "loop:prefix", "private:store-masked", "storage:half")
             if edge != "past" and sizes is LAUNCH_SIZES else None)
    rerun = aimed == "rmw:multi-task"
    # a few statements each: up to PROBES_BESIDES of them ride along (one aim per program left the
    # last of the dozen non-past shapes unmade after 30 programs on three of six offsets)
    also = []
    while aimed is not None and len(also) < PROBES_BESIDES:
        more = pick.aim(*(s for s in PROBE_SHAPES if s != aimed and s not in also))
        if more is None:
            break
        also.append(more)
    if rerun:       # 3 to 5 whole blocks and a few threads more: a read-modify-write is planted below
        n = pick.int(3, max(3, min(5, 320 // block))) * block + pick.pick([0, 1, 3, 5, 7])
    elif sizes is LAUNCH_SIZES and pick.maybe(NEAR_PERCENT):
        # k blocks and d threads: the whole-block and partial-block bodies, the last packet, and
        # the pool's caller/task decision all change at these sizes
        k = pick.int(1, max(1, min(5, 320 // block)))
        n = max(1, k * block + pick.pick(NEAR_OFFSETS))
    gen = KernelBuilder(source, n, block, steer)
    gen.stress, gen.aimed, gen.also, gen.rerun = stress, aimed, tuple(also), rerun
    gen.wanted = frozenset([aimed, *also]) - {None}
    gen.draw_focus()
    kernel, buffers, scalar_types, consts = build_kernel(gen, max_stmts, edge)
    scalars = {name: scalar_value(gen, dt) for name, dt in scalar_types.items()}
    seed = gen.int(0, 2 ** 32 - 1)
    if edge != "past" and n // block >= 3 and not_idempotent(kernel):
        gen.shapes.add("rmw:multi-task")
    case = Case(kernel, n, consts, tuple(buffers), scalars, seed, steering=steer, shapes=frozenset(gen.shapes))
    if gen.maybe(SOURCE_PERCENT):
        from .pysource import source_round_trip
        text, k2, check = source_round_trip(kernel)
        case.source, case.source_check = text, check
        if check is None:                  # the frontend's kernel is what runs (with its locations)
            case.kernel = k2
    return case


@st.composite
def cases(draw, max_stmts: int = 16, sizes=LAUNCH_SIZES, blocks=BLOCKS, steer=None):
    """A random, valid, well-defined launch as a Hypothesis strategy (shrinks)."""
    return build_case(HypothesisDraws(draw), max_stmts, sizes, blocks, steer)


def generate(seed: int, steer=None, max_stmts: int = 16, sizes=LAUNCH_SIZES, blocks=BLOCKS,
             stress: bool = False) -> Case:
    """The program of an integer seed (under a steering): the same Case in every process."""
    return build_case(SeededDraws(seed), max_stmts, sizes, blocks, steer, stress)


def kernels(**kw):
    """Just the kernels (for serializer and printer tests)."""
    return cases(**kw).map(lambda c: c.kernel)


def scalar_values(dt):
    """A Hypothesis strategy of scalar values of dtype dt (special values and any)."""
    if dt is F32:
        return st.one_of(st.sampled_from(SPECIAL_F32), st.floats(width=32)).map(np.float32)
    if dt is I32:
        return st.one_of(st.sampled_from(SPECIAL_I32), st.integers(-(2 ** 31), 2 ** 31 - 1)).map(np.int32)
    return st.one_of(st.sampled_from(SPECIAL_U32), st.integers(0, 2 ** 32 - 1)).map(np.uint32)

