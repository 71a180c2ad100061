"""The fuzzer's generator: random, valid, well-defined kernels and their inputs.

Public interface (what fuzz.py, corpus.py, the tests and campaign drivers use):

    cases(max_stmts=16, sizes=LAUNCH_SIZES, blocks=BLOCKS, steer=None)
        a Hypothesis strategy of Case (failures shrink to minimal kernels)
    generate(seed, steer=None, max_stmts=16, sizes=..., blocks=...) -> Case
        the program of an integer seed, the same in every process (no Hypothesis run)
    kernels(**kw)                   the strategy's kernels only
    Case, BufferSpec                a launch: kernel, n, consts, buffers, scalars, inputs seed
                                    (+ .steering, .source, .source_check: see case.py)
    make_args(case), fill(spec, seed, stream)     buffer contents from the inputs seed
    Steering                        weights over coverage categories (steer.py):
                                    Steering.from_report(fuzz.Coverage().report()),
                                    Steering.from_counts(counter), .to_json(), .from_json()
    categories(case)                the static coverage categories a program exercises
    variant_categories(record)      the access/effect categories of one variant run
    all_categories()                every category a campaign should reach
    kernel_source(k), parse_source(text, name), source_round_trip(k)
                                    kernels as Python source through the frontend (pysource.py)

What a generated kernel guarantees, by construction:

- Valid (`spec.validate`) and well defined for the interpreter, but for one access of a
  quarter of the programs: one element past the edge of its own buffer (`xe`, `ye`), an
  expected-error program whose one error every checking build must report (boundary.py;
  a fifth of the programs access such a buffer exactly at its edge or one short). Every load
  index has a known range (`g + c`, `2*g + c`, `g // 3 + c`, `L-1-g`, loop
  variables of known range, `(j - d) % k + c'` with a negative dividend, ...)
  or is forced into range (`(e & 0x7fffffff) % L`, `((e % L) + L) % L`,
  `u32(e) % u32(L)`, `min(max(e, 0), L-1)`); private indices likewise.
- Stores never conflict. Output buffer Y has K slots; thread g owns address
  `pi_j(g) + j*M` of slot j (or `pi(g)*K + j`, interleaved), pi a bijection
  of [0, M) chosen per slot (identity, reversal, `(a*g + c) % M` with
  gcd(a, M) = 1, `g ^ m`, a loaded permutation, block transposition, an odd
  multiplier of t within its block); M >= the padded launch.
- No races: a thread reads an output only at its own addresses, except that
  after a collective it may read slot j of a neighbour in its block if no
  thread stores slot j in that phase.
- No integer division by zero, no shift out of range; bit casts from f32
  canonicalise NaN first (a NaN's payload is unspecified, DESIGN §3).

Loops have small trip counts: uniform (literals, Const parameters, scalars)
or per thread (`range(t, LIM, B)`, counts from the thread id or loaded data,
and `range(a*t + c, stop, step)`: affine starts of any stride, steps of
either sign and any size, uniform or per-thread stops). A wrong value only
counts if it reaches an output, so stores prefer slots not stored yet,
assignments in branches prefer variables that outlive them, the kernel ends
by storing a hash of every live variable, and probes store shapes that are
easy to get wrong (FMA contraction, min/max with NaN or ±0, float to int out
of range, private elements at per-thread indices, interleaved store groups,
sometimes read back right after they are written). Collectives reduce NaN,
±0, ±inf and integer extremes placed in chosen lanes, or -0.0 in every lane
(a sum that is exactly -0.0). Bool buffers may hold any byte (nonzero is
True). Blocks run from 8 to 128 threads. A quarter of the programs are
printed as Python source and parsed by the frontend, whose IR must equal the
generated IR (`Case.source_check` says where it did not); the frontend's
kernel is then the one that runs.

Swarm focus (base.draw_focus): each program emphasises zero to three
operation families (division and remainder, compares, collectives, math,
...) four times over their usual weight, so that every family gets programs
dense in it. Probes store all six float predicates of a NaN-bearing pair,
and x // k and x % k of a signed x, straight to an output.

Steering (steer.py, plant.py): under a `Steering`, choices that exercise
categories a campaign has not seen (or seldom) weigh more, and up to eight
never-seen categories per program are planted outright. A program is a pure
function of (draws, steering); each Case records its steering. Campaign state
decides the steering (which programs finished, which variants reported which
access modes), so it cannot come from a seed alone; record it per program,
or refresh it only between Hypothesis runs (a run's shrinking replays its
choices under the same steering).

Package layout: case (Case, BufferSpec), inputs (make_args), draws (the two
draw sources), base (choices, literals, expressions), index (index forms,
output addresses), stmts (statements, loops, collectives), plant (coverage
plants), build (kernels, cases, generate), steer (categories, Steering),
pysource (source printer, frontend round trip).
"""
from .base import MATH_FUNCTIONS, SPECIAL_F32, SPECIAL_I32, SPECIAL_U32
from .build import BLOCKS, LAUNCH_SIZES, SOURCE_PERCENT, cases, generate, kernels, scalar_values
from .case import FILLS, BufferSpec, Case
from .inputs import fill, make_args
from .pysource import kernel_source, parse_source, source_round_trip
from .steer import Steering, all_categories, categories, variant_categories

__all__ = ["BLOCKS", "BufferSpec", "Case", "FILLS", "LAUNCH_SIZES", "MATH_FUNCTIONS", "SOURCE_PERCENT",
           "SPECIAL_F32", "SPECIAL_I32", "SPECIAL_U32", "Steering", "all_categories", "cases", "categories",
           "fill", "generate", "kernel_source", "kernels", "make_args", "parse_source", "scalar_values",
           "source_round_trip", "variant_categories"]
