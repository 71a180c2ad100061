"""The benchmark suites, as data: one definition per seed table (DESIGN §7,
seeds 000-002). A suite names its timing boundary, its cases, its columns
(variants, or TorchInductor) and the paired ratios its table reports.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..backend import target as _target
from ..backend.variant import register_packet
from ..refimpl import ops


@dataclass(frozen=True)
class Column:
    name: str                 # the table's column heading
    kind: str                 # "variant" | "inductor" | "eager"
    spec: str = ""            # a variant spelling (cohort run --variant)


@dataclass(frozen=True)
class Ratio:
    candidate: str
    baseline: str
    label: str
    limit: float = 0.0        # > 0: a median ratio above it fails the run (a regression guard)
    control: bool = False     # the A/A control: the same build timed as two columns


FORMS = ("stream", "private")
# Operators whose only formulation stands for a form they do not register under its name.
FORM_FALLBACK = {"attention": "attention has one formulation, which already keeps its accumulator "
                              "acc[Dv] in a private array",
                 # the cooperative operators' forms are not stream/private: their default runs
                 "matmul": "matmul runs its tiled form (the wide form is for matrix-vector products)",
                 "histogram": "histogram runs its shared-bins form"}


def _is_auto(col: Column) -> bool:
    from ..backend.launch_policy import is_auto
    return col.kind == "variant" and is_auto(col.spec)


def control_name(name: str) -> str:
    return name + "'"   # the A/A copy of column A is A'


@dataclass(frozen=True)
class Group:
    """A block of comparisons sharing columns: one timed comparison per case.

    Every group carries an A/A control (DESIGN §7): its `control` column (by
    default the first ratio's baseline, or the first fixed-policy variant column
    of the ratios) is timed a second time as A' in the same design, and A'/A is
    reported; a ratio whose range overlaps the A/A range is no stable difference.
    """
    title: str
    cases: tuple              # ((op, shape), ...)
    columns: tuple            # Column, ...
    ratios: tuple             # Ratio, ...
    form: str = "stream"      # the operators' formulation (Operator.form) every case uses
    control: str = ""         # the column timed twice for the A/A control ("" : see above)
    workers: int = 0          # threads for this group's columns (0: the suite's, ALL_CORES: the machine's)
    by_width: bool = False    # an operator that picks its form by width (Operator.choose_form: matmul,
                              # attention) runs each cohort column in the form cohort.torch picks for
                              # that column's lanes on this machine, as a user's call does

    def __post_init__(self):
        if any(r.control for r in self.ratios):
            return
        names = {c.name: c for c in self.columns}
        pick = self.control
        if not pick:
            wanted = [r.baseline for r in self.ratios] + [r.candidate for r in self.ratios] + list(names)
            fixed = [n for n in wanted if n in names and names[n].kind == "variant" and not _is_auto(names[n])]
            pick = fixed[0] if fixed else next(iter(names))
        a = names[pick]
        copy = Column(control_name(a.name), a.kind, a.spec)
        object.__setattr__(self, "control", pick)
        object.__setattr__(self, "columns", tuple(self.columns) + (copy,))
        object.__setattr__(self, "ratios", tuple(self.ratios) + (
            Ratio(copy.name, a.name, f"A/A {copy.name}/{a.name}", control=True),))

    @property
    def control_ratio(self) -> Ratio:
        return next(r for r in self.ratios if r.control)


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    boundary: str             # "native_entry" | "runtime_e2e" | "python_api"
    groups: tuple
    rounds: int = 6           # rounded up to complete designs (measure.complete_rounds)
    samples: int = 7
    workers: int = 1          # requested workers (runtime_e2e / python_api); native entry: 1
    notes: str = ""
    roofline: tuple = ()      # columns compared with this machine's memory and compute bounds
    design: str = "balanced"  # "balanced" (permutations / Williams) | "reversed" (the seeds' E2E protocol)
    strategies: tuple = ()    # ((column, what it does), ...): notes.md, next to the tables

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "boundary": self.boundary, "rounds": self.rounds,
                "samples": self.samples, "workers": self.workers, "notes": self.notes,
                "roofline": list(self.roofline), "design": self.design,
                "strategies": [list(s) for s in self.strategies],
                "groups": [{"title": g.title, "cases": [[op, list(s)] for op, s in g.cases], "form": g.form,
                            "control": g.control, **({"workers": g.workers} if g.workers else {}),
                            **({"by_width": True} if g.by_width else {}),
                            "columns": [vars(c) for c in g.columns], "ratios": [vars(r) for r in g.ratios]}
                           for g in self.groups]}


def operator(name: str, form: str):
    """(operator in `form`, the form it runs, a note) - or ShapeError when it has no such form."""
    op = ops.get(name)
    try:
        return op.with_form(form), form, ""
    except ops.ShapeError:
        if name in FORM_FALLBACK:
            return op, op.form, FORM_FALLBACK[name]
        raise


def _rows(op_names, sizes, even_for_rope=True):
    out = []
    for name in op_names:
        for r, c in sizes:
            out.append((name, (r, c + c % 2) if name == "rope" and even_for_rope else (r, c)))
    return tuple(out)


ROW_OPS = tuple(op.name for op in ops.tagged("row"))
ALL_SEED_CASES = tuple((name, s) for name, op in ops.OPERATORS.items() for s in op.seed_sizes)

WHOLE = Column("whole", "variant", "whole")
PACKET = Column("packet", "variant", "packet")
INDUCTOR = Column("inductor", "inductor")
EAGER = Column("eager", "eager")


def peer_ratios(candidate: str, inductor: str = "inductor", label: str = "") -> tuple:
    """candidate against each peer and against the better of the two, round by round (issue 25:
    a PyTorch user picks whichever of eager and torch.compile is faster)."""
    label = label or candidate
    ind = "Inductor" + inductor[len("inductor"):]
    return (Ratio(candidate, inductor, f"{label}/{ind}"), Ratio(candidate, "eager", f"{label}/eager"),
            Ratio(candidate, f"{inductor}|eager", f"{label}/best peer"))


INDUCTOR_W8 = Column("inductor-w8", "inductor", "simdlen=256")
PACKET_W16 = Column("packet-w16", "variant", "packet,lanes=16")


# Widths in these texts are the host target's (target.py): registers per packet, not bits.
_HOST = _target.host()
# cohort.torch's default on this host (cohort/torch/launch.py: a packet fills one vector register)
_HOST_DEFAULT = register_packet(_HOST.vector_bits)
NATIVE_STRATEGIES = (
    ("whole", "lanes=1: every thread run one after another, scalar code"),
    ("packet", f"lanes=8 (W8): a block's threads run as packets of 8 SIMD lanes ({_HOST.width_text(8)})"),
    ("packet-w16", f"lanes=16: the same lowering at 16 lanes ({_HOST.width_text(16)})"),
    ("inductor", f"TorchInductor's generated C++ kernel (this host's widest vectors: {_HOST.vector_isa}, "
                 f"{_HOST.vector_bits // 32} lanes), one thread"),
    ("inductor-w8", "the same Inductor compile with cpp.simdlen=256 (8 lanes)"),
    ("eager", "eager PyTorch: the operator's eager torch code as the same ATen calls from C++ (through the "
              "dispatcher, inference mode, each call allocating its output), called by the native timer; "
              "ATen picks its vector width at run time (this host's widest)"),
)
EAGER_NOTE = ("eager: eager PyTorch, the same ATen calls as the eager code, from native code (no Python), "
              "inference mode, one thread; best peer: per round the faster of Inductor and eager.")


def _native():
    # Each group compares equal widths: cohort at 16 lanes against Inductor's default (this
    # host's widest vectors: 16 lanes on a 512-bit machine), cohort's W8 against Inductor at 8 lanes.
    return Suite(
        "native", "Native entry: whole, packet and TorchInductor", "native_entry",
        (Group("native, 16 lanes", ALL_SEED_CASES, (WHOLE, PACKET_W16, INDUCTOR, EAGER),
               peer_ratios("packet-w16") + (Ratio("packet-w16", "whole", "packet-w16/whole"),),
               control="packet-w16", by_width=True),
         Group("native, 8 lanes", ALL_SEED_CASES, (PACKET, INDUCTOR_W8, EAGER),
               peer_ratios("packet", "inductor-w8"), control="packet", by_width=True)),
        notes=f"Target: {_HOST.name}, {_HOST.vector_isa} ({_HOST.vector_bits}-bit vector registers). Each group "
              f"compares equal vector widths. inductor: Inductor's default, this host's widest vectors "
              f"({_HOST.vector_bits // 32} lanes here), against packet-w16 (lanes=16, {_HOST.width_text(16)}); "
              f"inductor-w8: the same compile with cpp.simdlen=256 (8 lanes), against packet (W8, "
              f"{_HOST.width_text(8)}). Single thread. Inductor: its "
              "generated C++ kernels called through a trampoline from the same native timer; for attention "
              "(whose graph calls ATen's SDPA) AOTInductor's whole compiled model. " + EAGER_NOTE,
        roofline=("packet-w16", "packet", "inductor", "eager"), strategies=NATIVE_STRATEGIES)


def _private():
    sizes = ((17, 65), (257, 1538), (1024, 4097), (129, 768), (137, 1023), (513, 2051))
    return Suite(
        "private", "Cohort private access: RMSNorm, native entry", "native_entry",
        (Group("private", _rows(("rmsnorm",), sizes),
               (Column("baseline", "variant", "packet-thread-private"), Column("candidate", "variant", "packet"),
                INDUCTOR, EAGER),
               (Ratio("candidate", "baseline", "candidate/baseline"),) + peer_ratios("candidate"),
               form="private"),),
        notes="baseline: private=thread; candidate: private=cohort (the seeds' cohort private access), both "
              "in the operators' private-state form. " + EAGER_NOTE,
        strategies=(("baseline", "packet, private=thread: each lane's private array contiguous on its own, "
                                 "strided across the lanes of a packet"),
                    ("candidate", "packet, private=cohort: element-major across the cohort's lanes, so a "
                                  "packet's lanes touch consecutive private addresses (vector loads/stores)"),
                    ("inductor", "TorchInductor's generated C++ kernel, one thread"), NATIVE_STRATEGIES[-1]))


ALL_CORES = -1     # a group's workers: every core of the machine running the suite
SEED_WORKERS = 8   # the seeds request 8 CPU workers for every runtime-E2E table


def _e2e():
    sizes = ((3, 63), (17, 65), (64, 256), (129, 769), (257, 1538), (1024, 4097), (17, 16384), (137, 1023),
             (513, 2051))
    groups = []
    for lanes in (1, 8):
        cases = _rows(ROW_OPS, sizes)
        if lanes == 1:   # the seed measures attention at local=1 only
            cases += tuple(("attention", s) for s in ops.get("attention").seed_sizes)
        groups.append(Group(
            f"local={lanes}", cases,
            (Column("off", "variant", f"lanes={lanes},private=thread,grain=legacy"),
             Column("on", "variant", f"lanes={lanes},private=cohort,grain=legacy")),
            (Ratio("on", "off", "on/off"),), form="private", control="off"))
    return Suite("e2e", "Runtime E2E: cohort private access off -> on", "runtime_e2e", tuple(groups),
                 rounds=2, samples=7, workers=SEED_WORKERS, design="reversed",
                 notes="The seeds' protocol: 2 reversed orders of 7 samples (--rounds raises it, in pairs of "
                       "reversed orders); off = private=thread, on = private=cohort, legacy task grain.",
                 strategies=(("off", "private=thread: each thread's private array contiguous on its own"),
                             ("on", "private=cohort: private arrays element-major across a cohort's lanes")))


GRAIN_STRATEGIES = (
    ("whole", "lanes=1 (whole-program), the legacy split: ceil(blocks / workers) blocks per task"),
    ("local", "lanes=8 (packet-local), the legacy split"),
    ("joint_legacy", "grain=joint_legacy: per launch, lanes (8 or 1) chosen by measurement - the first "
                     "launches try each candidate 5 times in rotation, the fastest median is kept - with the "
                     "legacy split only (a split into one task runs on the caller); in these tables the "
                     "choice is measured anew before every round and recorded"),
    ("joint_tasks", "grain=auto: lanes (8 or 1) and the task cut chosen together by the same measurement; "
                    "candidates: the whole launch on the caller, the runtime's grain (ceil(blocks / (4 "
                    "workers)) blocks per task) and the legacy split; chosen anew before every round"),
    ("grain_0", "lanes=8, grain 0: the runtime's pick, ceil(blocks / (4 workers)) blocks per task"),
    ("grain_1", "lanes=8, 1 block per task"),
    ("grain_3", "lanes=8, 3 blocks per task"),
    ("grain_4294967295", "lanes=8, the whole launch on the calling thread (the seeds' grain 4294967295)"),
)


def _grain():
    pilot = (("rmsnorm", (17, 65)), ("rmsnorm", (64, 256)), ("rmsnorm", (1024, 4096)),
             ("gelu_residual", (64, 256)), ("swiglu", (64, 256)))
    validation = _rows(ROW_OPS, ((3, 1024), (129, 768), (257, 1538), (4096, 1024))) + \
        tuple(("attention", s) for s in ops.get("attention").seed_sizes)
    policy_cols = (Column("whole", "variant", "whole,grain=legacy"), Column("local", "variant", "packet,grain=legacy"),
                   Column("joint_legacy", "variant", "packet,grain=joint_legacy"),
                   Column("joint_tasks", "variant", "packet,grain=auto"))
    seed_ratio = (Ratio("joint_tasks", "joint_legacy", "joint_tasks/joint_legacy"),)
    fixed = _rows(ROW_OPS, ((17, 66), (129, 768), (1024, 4096)))
    fixed_cols = (Column("grain_0", "variant", "packet,grain=0"), Column("grain_1", "variant", "packet,grain=1"),
                  Column("grain_3", "variant", "packet,grain=3"),
                  Column("grain_4294967295", "variant", "packet,grain=caller"))
    return Suite(
        "grain", "Task grain: runtime E2E", "runtime_e2e",
        (Group("pilot", pilot, policy_cols, seed_ratio, control="local"),
         Group("validation", validation, policy_cols, seed_ratio, control="local"),
         Group("fixed-grain", fixed, fixed_cols, (Ratio("grain_4294967295", "grain_0", "caller/grain_0"),),
               control="grain_0")),
        rounds=10, samples=7, workers=SEED_WORKERS,
        notes="Candidate strategies: see notes.md. joint_tasks = grain=auto (lanes and grain chosen together), "
              "joint_legacy = lanes chosen with the legacy split; both choose anew each round, and what they "
              "chose is listed per case.",
        strategies=GRAIN_STRATEGIES)


def _api():
    pilot = (("rmsnorm", (17, 65)), ("rmsnorm", (64, 256)), ("rmsnorm", (1024, 4096)))
    return Suite(
        "api", "Python API launches (not the seeds' runtime E2E)", "python_api",
        (Group("python api", pilot, (Column("local", "variant", "packet,grain=legacy"),
                                     Column("joint_tasks", "variant", "packet,grain=auto")),
               (Ratio("joint_tasks", "local", "joint_tasks/local"),), control="local"),),
        rounds=6, samples=7, workers=SEED_WORKERS,
        notes="CompiledKernel.launch called from a Python loop: argument checks (cached), the policy and the "
              "pool, plus the Python call itself. Useful for users; never compared with the native boundaries.",
        strategies=GRAIN_STRATEGIES[1:2] + GRAIN_STRATEGIES[3:4])


# packet/whole measured on the development VM (docs/native): rmsnorm 17x65 0.08, rope 64x256
# 0.21, attention 0.15. A packet path that silently lost its vectors would sit near 1.
QUICK_PACKET_WHOLE_LIMIT = 0.5


def _quick():
    cases = (("rmsnorm", (17, 65)), ("rope", (64, 256)), ("attention", (1, 4, 2, 16, 32, 16, 16)))
    return Suite("quick", "Quick check (CI)", "native_entry",
                 (Group("quick", cases, (WHOLE, PACKET, INDUCTOR, EAGER),
                        peer_ratios("packet") +
                        (Ratio("packet", "whole", "packet/whole", limit=QUICK_PACKET_WHOLE_LIMIT),),
                        control="packet"),),
                 rounds=4, samples=5, roofline=("packet",), strategies=NATIVE_STRATEGIES,
                 notes=f"A packet/whole median above {QUICK_PACKET_WHOLE_LIMIT} fails the run: the packet path "
                       f"has lost its vectors (a regression guard, generous for a noisy machine).")


def _safety():
    cols = (Column("unsafe", "variant", "packet,unsafe=on"), Column("safe", "variant", "packet"),
            Column("whole-unsafe", "variant", "whole,unsafe=on"), Column("whole-safe", "variant", "whole"))
    return Suite(
        "safety", "Memory safety: the default (safe) build against unsafe=on, native entry", "native_entry",
        (Group("safety", ALL_SEED_CASES, cols,
               (Ratio("safe", "unsafe", "safe/unsafe"), Ratio("whole-safe", "whole-unsafe", "whole safe/unsafe"))),),
        notes="safe: affine indices proven in bounds once per entry call (a launch the proof cannot cover "
              "reruns with the checked build), data-dependent ones checked per access; unsafe=on: no checks. "
              "Needs --allow-unsafe. Single thread.")


# the LLM operators at the sizes their definitions give (Operator.llm_sizes: Llama-2-7B and Llama-3-8B)
LLM_CASES = tuple((op.name, s) for op in ops.tagged("llm") for s in op.llm_sizes)
TORCH_STRATEGIES = (
    ("cohort", f"cohort.torch.<op>(...) in its default variant ({_HOST_DEFAULT}); on all threads "
               f"{_HOST_DEFAULT},workers=<cores>,grain=auto"),
    ("torch.ops", "torch.ops.cohort.<op>.default(...): the same op through PyTorch's dispatcher"),
    ("eager", "the operator's eager torch code (its OpBinding, cohort/torch/binding.py), a plain call"),
    ("compile", "torch.compile of the same code (Inductor, dynamic=False), a plain call of the compiled "
                "function"),
)


def _torch_suite():
    cols = (Column("cohort", "torch"), Column("torch.ops", "torch", "dispatch"), EAGER,
            Column("compile", "inductor"))
    ratios = (Ratio("cohort", "eager", "cohort/eager"), Ratio("cohort", "compile", "cohort/compile"),
              Ratio("cohort", "compile|eager", "cohort/best peer"),
              Ratio("torch.ops", "compile|eager", "torch.ops/best peer"))
    return Suite(
        "torch", "PyTorch boundary: cohort.torch against eager torch and torch.compile", "torch_api",
        (Group("1 thread", LLM_CASES, cols, ratios, control="cohort", workers=1),
         Group("all threads", LLM_CASES, cols, ratios, control="cohort", workers=ALL_CORES)),
        rounds=6, samples=7, workers=1,
        notes="LLM operators at Llama-7B/8B sizes (rows: 1 = decode, 32 = batched decode, 512 = prefill). "
              "Every column is one Python call on the same torch tensors, returning a new tensor; "
              "cohort's output is checked bit for bit against the interpreter after every round, eager's "
              "and compile's against the float64 oracle. best peer: per round the faster of eager and "
              "compile. Threads: torch.set_num_threads and cohort's workers, per group (all threads: the "
              "machine's cores, as the header says).",
        strategies=TORCH_STRATEGIES)


# every operator at its largest seed size: the sizes where more than one thread can pay off
MT_CASES = tuple((name, max(op.seed_sizes, key=math.prod)) for name, op in ops.OPERATORS.items())


def _native_mt():
    pk, pk16 = Column("packet", "variant", "packet,grain=0"), Column("packet-w16", "variant", "lanes=16,grain=0")
    return Suite(
        "native-mt", "Native launch at 2 threads: cohort's pool against Inductor and eager torch",
        "runtime_e2e",
        (Group("2 threads", MT_CASES, (pk, pk16, INDUCTOR, EAGER),
               peer_ratios("packet-w16") + peer_ratios("packet")[2:], control="packet-w16", by_width=True),),
        rounds=6, samples=7, workers=2,
        notes="Every column called natively from the same timing loop, each with its own threads: cohort's "
              "runtime launch entry (tasks of the runtime's grain on the worker pool, and the wait), "
              "Inductor's generated kernels with their OpenMP regions at the same thread count (cpp.threads), "
              "eager torch's ATen calls with torch.set_num_threads the same. The largest seed size of each "
              "operator. " + EAGER_NOTE.replace("one thread", "at the group's threads"),
        strategies=(("packet", "lanes=8, grain 0 (ceil(blocks / (4 workers)) blocks per task) on the pool"),
                    ("packet-w16", "lanes=16, grain 0, on the pool"),
                    ("inductor", "TorchInductor's generated C++ kernels, OpenMP at the suite's thread count"),
                    NATIVE_STRATEGIES[-1]))


SUITES = {s.name: s for s in (_native(), _private(), _e2e(), _grain(), _api(), _quick(), _safety(),
                              _torch_suite(), _native_mt())}


def get(name: str) -> Suite:
    if name not in SUITES:
        raise KeyError(f"unknown suite {name!r}; suites are {', '.join(SUITES)}")
    return SUITES[name]


def unsafe_columns(suite: Suite) -> list:
    """The columns of a suite that run unsafe builds (cohort bench refuses them unless asked)."""
    from ..backend.variant import parse_variant
    return [c.name for g in suite.groups for c in g.columns
            if c.kind == "variant" and parse_variant(c.spec).unsafe]
