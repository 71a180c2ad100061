"""The benchmark suites, as data: one definition per seed table (DESIGN §7,
seeds 000-002). A suite names its timing boundary, its cases, its columns
(variants, or TorchInductor) and the paired ratios its table reports.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..refimpl import ops


@dataclass(frozen=True)
class Column:
    name: str                 # the table's column heading
    kind: str                 # "variant" | "inductor"
    spec: str = ""            # a variant spelling (cohort run --variant)


@dataclass(frozen=True)
class Ratio:
    candidate: str
    baseline: str
    label: str
    limit: float = 0.0        # > 0: a median ratio above it fails the run (a regression guard)


@dataclass(frozen=True)
class Group:
    """A block of comparisons sharing columns: one timed comparison per case."""
    title: str
    cases: tuple              # ((op, shape), ...)
    columns: tuple            # Column, ...
    ratios: tuple             # Ratio, ...


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    boundary: str             # "native_entry" | "runtime_e2e"
    groups: tuple
    rounds: int = 6
    samples: int = 7
    workers: int = 1
    notes: str = ""
    roofline: tuple = ()      # columns compared with this machine's memory and compute bounds

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "boundary": self.boundary, "rounds": self.rounds,
                "samples": self.samples, "workers": self.workers, "notes": self.notes,
                "roofline": list(self.roofline),
                "groups": [{"title": g.title, "cases": [[op, list(s)] for op, s in g.cases],
                            "columns": [vars(c) for c in g.columns], "ratios": [vars(r) for r in g.ratios]}
                           for g in self.groups]}


def _rows(op_names, sizes, even_for_rope=True):
    out = []
    for name in op_names:
        for r, c in sizes:
            out.append((name, (r, c + c % 2) if name == "rope" and even_for_rope else (r, c)))
    return tuple(out)


ROW_OPS = ("rmsnorm", "layernorm", "masked_softmax", "swiglu", "gelu_residual", "rope")
ALL_SEED_CASES = tuple((name, s) for name, op in ops.OPERATORS.items() for s in op.seed_sizes)

WHOLE = Column("whole", "variant", "whole")
PACKET = Column("packet", "variant", "packet")
INDUCTOR = Column("inductor", "inductor")


INDUCTOR_W8 = Column("inductor-w8", "inductor", "simdlen=256")


def _native():
    return Suite(
        "native", "Native entry: whole, packet and TorchInductor", "native_entry",
        (Group("native", ALL_SEED_CASES, (WHOLE, PACKET, INDUCTOR),
               (Ratio("packet", "inductor", "packet/Inductor"), Ratio("packet", "whole", "packet/whole"))),
         Group("native, Inductor at 8 lanes", ALL_SEED_CASES, (PACKET, INDUCTOR_W8),
               (Ratio("packet", "inductor-w8", "packet/Inductor-w8"),))),
        notes="Inductor uses this host's widest vectors (AVX-512, 16 lanes) unless told otherwise; "
              "inductor-w8 is the same compile with cpp.simdlen=256 (8 lanes, as W8 and as the AVX2 "
              "machine of ANCHORS.md). ""Single thread. Inductor: its generated C++ kernels called through a trampoline from the same "
              "native timer; for attention (whose graph calls ATen's SDPA) AOTInductor's whole compiled model.",
        roofline=("packet", "inductor"))


def _private():
    sizes = ((17, 65), (257, 1538), (1024, 4097), (129, 768), (137, 1023), (513, 2051))
    return Suite(
        "private", "Cohort private access: RMSNorm, native entry", "native_entry",
        (Group("private", _rows(("rmsnorm",), sizes),
               (Column("baseline", "variant", "packet-thread-private"), Column("candidate", "variant", "packet"),
                INDUCTOR),
               (Ratio("candidate", "baseline", "candidate/baseline"),
                Ratio("candidate", "inductor", "candidate/Inductor"))),),
        notes="baseline: private=thread; candidate: private=cohort (the seeds' cohort private access).")


def _e2e():
    sizes = ((3, 63), (17, 65), (64, 256), (129, 769), (257, 1538), (1024, 4097), (17, 16384), (137, 1023),
             (513, 2051))
    groups = []
    for lanes in (1, 8):
        cases = _rows(ROW_OPS, sizes) + tuple(("attention", s) for s in ops.get("attention").seed_sizes)
        groups.append(Group(
            f"local={lanes}", cases,
            (Column("off", "variant", f"lanes={lanes},private=thread,grain=legacy"),
             Column("on", "variant", f"lanes={lanes},private=cohort,grain=legacy")),
            (Ratio("on", "off", "on/off"),)))
    return Suite("e2e", "Runtime E2E: cohort private access off -> on", "runtime_e2e", tuple(groups),
                 rounds=6, samples=7, workers=0,
                 notes="2 columns per comparison: AB/BA orders. workers=0 means the machine's cores.")


def _grain():
    pilot = (("rmsnorm", (17, 65)), ("rmsnorm", (64, 256)), ("rmsnorm", (1024, 4096)),
             ("gelu_residual", (64, 256)), ("swiglu", (64, 256)))
    validation = _rows(ROW_OPS, ((3, 1024), (129, 768), (257, 1538), (4096, 1024))) + \
        tuple(("attention", s) for s in ops.get("attention").seed_sizes)
    policy_cols = (Column("whole", "variant", "whole,grain=legacy"), Column("local", "variant", "packet,grain=legacy"),
                   Column("joint_tasks", "variant", "packet,grain=auto"))
    fixed = _rows(ROW_OPS, ((17, 66), (129, 768), (1024, 4096)))
    fixed_cols = (Column("grain_0", "variant", "packet,grain=0"), Column("grain_1", "variant", "packet,grain=1"),
                  Column("grain_3", "variant", "packet,grain=3"),
                  Column("grain_4294967295", "variant", "packet,grain=caller"))
    return Suite(
        "grain", "Task grain: runtime E2E", "runtime_e2e",
        (Group("pilot", pilot, policy_cols, (Ratio("joint_tasks", "local", "joint_tasks/local"),)),
         Group("validation", validation, policy_cols, (Ratio("joint_tasks", "local", "joint_tasks/local"),)),
         Group("fixed-grain", fixed, fixed_cols, (Ratio("grain_4294967295", "grain_0", "caller/grain_0"),))),
        rounds=6, samples=7, workers=0,
        notes="joint_tasks = grain=auto (lanes and grain chosen together). workers=0 means the machine's cores.")


# packet/whole measured on the development VM (docs/native): rmsnorm 17x65 0.08, rope 64x256
# 0.21, attention 0.15. A packet path that silently lost its vectors would sit near 1.
QUICK_PACKET_WHOLE_LIMIT = 0.5


def _quick():
    cases = (("rmsnorm", (17, 65)), ("rope", (64, 256)), ("attention", (1, 4, 2, 16, 32, 16, 16)))
    return Suite("quick", "Quick check (CI)", "native_entry",
                 (Group("quick", cases, (WHOLE, PACKET, INDUCTOR),
                        (Ratio("packet", "inductor", "packet/Inductor"),
                         Ratio("packet", "whole", "packet/whole", limit=QUICK_PACKET_WHOLE_LIMIT))),),
                 rounds=3, samples=5, roofline=("packet",),
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


SUITES = {s.name: s for s in (_native(), _private(), _e2e(), _grain(), _quick(), _safety())}


def get(name: str) -> Suite:
    if name not in SUITES:
        raise KeyError(f"unknown suite {name!r}; suites are {', '.join(SUITES)}")
    return SUITES[name]


def unsafe_columns(suite: Suite) -> list:
    """The columns of a suite that run unsafe builds (cohort bench refuses them unless asked)."""
    from ..backend.variant import parse_variant
    return [c.name for g in suite.groups for c in g.columns
            if c.kind == "variant" and parse_variant(c.spec).unsafe]
