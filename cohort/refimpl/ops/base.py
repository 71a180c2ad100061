"""What every operator carries: kernel, launch geometry, seeded inputs, oracle."""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..frontend import KernelFunction


class ShapeError(ValueError):
    """A shape an operator cannot run (malformed, wrong rank, odd C for rope, ...)."""


# The tags an operator may carry; tables select operators by them (ops.tagged), never by a list of names.
TAGS = {
    "row": "a row-wise operator of the seed tables ([R, C] rows): the e2e and grain suites' cases",
    "llm": "run at LLM sizes (llm_sizes): the torch suite's cases",
    "cooperative": "its kernel uses shared memory, barriers or atomics (DESIGN §4, issue 24)",
}


@dataclass(frozen=True)
class Launch:
    n: int            # threads
    consts: dict      # Const parameters
    scalars: dict     # scalar parameters


@dataclass(frozen=True)
class Operator:
    name: str
    kernel: KernelFunction
    dims: tuple                       # names of the shape's dimensions
    buffer_shapes: Callable           # shape -> {buffer name: logical shape}, inputs first, output last
    output: str
    launch: Callable                  # shape -> Launch
    make_inputs: Callable             # (shape, seed) -> {input name: array of its logical shape}
    oracle: Callable                  # inputs -> float64 output of the logical shape
    seed_sizes: tuple
    rel_tol: float                    # |y - oracle| <= rel_tol * max|oracle| over the row
    definition: str
    fast_math_ulps: float = 8.0       # fast-math variants: |y - ref| <= this many ulps of the row's max |ref|
    check: Callable = lambda shape: None   # raises ShapeError for shapes it cannot run
    forms: tuple = ()                 # ((form name, KernelFunction[, launch]), ...): other formulations
    aux: tuple = ()                   # buffers a launch needs that are neither inputs nor the output
                                      # (zero-filled; attention's mask when there is none)
    form: str = "stream"              # the formulation `kernel` is (and `launch` its geometry)
    oracle_shape: bool = False        # the oracle is (inputs, shape) -> output (histogram: BINS)
    accumulates: bool = False         # atomics add into the output: a launch wants it zeroed first
    tags: frozenset = frozenset()     # what the operator is, for the tables that select by it (TAGS)
    llm_sizes: tuple = ()             # shapes an LLM runs it at (Llama-2-7B / Llama-3-8B: decode, a batch
                                      # of 32 decoding tokens, a 512-token prefill): the torch suite's cases
    choose_form: Callable = None      # (shape, lanes, vector_bits) -> the form cohort.torch runs a launch
                                      # of shape in, in packets of lanes on vector_bits-bit registers

    def __post_init__(self):
        object.__setattr__(self, "tags", frozenset(self.tags))
        unknown = self.tags - TAGS.keys()
        if unknown:
            raise ValueError(f"{self.name}: unknown tag(s) {sorted(unknown)}; tags are {', '.join(TAGS)}")
        if ("llm" in self.tags) != bool(self.llm_sizes):
            raise ValueError(f"{self.name}: the tag 'llm' and llm_sizes go together")
        # A form given without a launch runs on the operator's; bind it now, so that
        # after with_form has swapped in a form with its own geometry every form
        # still carries the launch it was written for.
        forms = []
        for f in self.forms:
            if len(f) not in (2, 3):
                raise ValueError(f"{self.name}: a form is (name, kernel) or (name, kernel, launch), got {f!r}")
            forms.append((f[0], f[1], f[2] if len(f) == 3 else self.launch))
        object.__setattr__(self, "forms", tuple(forms))

    def with_form(self, form: str) -> "Operator":
        """This operator with `kernel` and `launch` replaced by its formulation `form`
        (same buffers, inputs and oracle; outputs bit-identical by the tests). The
        current formulation moves into `forms`, so with_form round-trips."""
        if form == self.form:
            return self
        for name, k, launch in self.forms:
            if name == form:
                from dataclasses import replace
                rest = tuple(f for f in self.forms if f[0] != form)
                return replace(self, kernel=k, launch=launch, form=form,
                               forms=rest + ((self.form, self.kernel, self.launch),))
        known = ", ".join([self.form] + [f[0] for f in self.forms])
        raise ShapeError(f"{self.name} has no form {form!r}; forms are {known}")

    def chosen_form(self, shape, lanes: int, vector_bits: int) -> "Operator":
        """This operator in the form a launch of `shape` runs in at `lanes` on a machine with
        `vector_bits`-bit vector registers: the choice cohort.torch makes (choose_form), or
        this form for an operator with one formulation to run."""
        if self.choose_form is None:
            return self
        return self.with_form(self.choose_form(tuple(shape), lanes, vector_bits))

    def expected(self, inputs: dict, shape) -> np.ndarray:
        """The float64 oracle's output for `inputs` of a launch of `shape`."""
        return self.oracle(inputs, shape) if self.oracle_shape else self.oracle(inputs)

    @property
    def inputs(self) -> tuple:
        return tuple(n for n in self.buffer_shapes(self.seed_sizes[0]) if n != self.output and n not in self.aux)

    def parse_shape(self, text: str) -> tuple:
        parts = str(text).lower().replace("×", "x").split("x")
        try:
            shape = tuple(int(p) for p in parts)
        except ValueError:
            raise ShapeError(f"malformed shape {text!r}: expected {'x'.join(self.dims)} with integers") from None
        if len(shape) != len(self.dims):
            raise ShapeError(f"{self.name} takes a shape {'x'.join(self.dims)} "
                             f"({len(self.dims)} numbers), got {text!r}")
        for d, v in zip(self.dims, shape):
            if v < 1:
                raise ShapeError(f"{self.name}: dimension {d} must be at least 1, got {v}")
        self.check(shape)
        limit = 1 << 30
        for name, s in self.buffer_shapes(shape).items():
            count = math.prod(int(d) for d in s)     # Python ints: a product that wraps would pass
            if count >= limit:
                raise ShapeError(f"{self.name} {text}: buffer {name} would have {count} "
                                 f"elements; at most {limit - 1}")
        return shape

    def signature(self) -> str:
        shapes = self.buffer_shapes(tuple(_Dim(d) for d in self.dims))
        ins = ", ".join(f"{n}[{','.join(map(str, s))}]" for n, s in shapes.items()
                        if n != self.output and n not in self.aux)
        out = f"{self.output}[{','.join(map(str, shapes[self.output]))}]"
        return f"{ins} -> {out}"


class _Dim(str):
    """A dimension's name standing in for its value, to print signatures like C/2."""

    def __floordiv__(self, k):
        return _Dim(f"{self}/{k}")


def fmt_shape(shape) -> str:
    return "x".join(str(d) for d in shape)


# ---------------------------------------------------------------- seeded inputs
# Counter-based and pure integer arithmetic (splitmix64), then exact float64
# steps: the same seed gives the same bits on every machine and NumPy version.

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _stream(seed: int, op: str, name: str, count: int) -> np.ndarray:
    key = (int(seed) * 0x100000001B3 + zlib.crc32(f"{op}/{name}".encode())) & 0xFFFFFFFFFFFFFFFF
    with np.errstate(over="ignore"):
        ctr = np.arange(count, dtype=np.uint64) * np.uint64(4) + np.uint64(key)
    return ctr


def seeded_normal(seed: int, op: str, name: str, shape, scale: float = 1.0) -> np.ndarray:
    """Approximately N(0, scale^2): a sum of four 24-bit uniforms (Irwin-Hall), exact in float64."""
    count = int(np.prod(shape))
    ctr = _stream(seed, op, name, count)
    acc = np.zeros(count, np.float64)
    for k in range(4):
        bits = _splitmix64(ctr + np.uint64(k)) >> np.uint64(40)          # 24 bits
        acc += bits.astype(np.float64) * (1.0 / (1 << 24))
    z = (acc - 2.0) * np.sqrt(3.0)                                        # variance 1
    return (z * scale).astype(np.float32).reshape(shape)


def seeded_uniform(seed: int, op: str, name: str, shape, lo: float, hi: float) -> np.ndarray:
    count = int(np.prod(shape))
    bits = _splitmix64(_stream(seed, op, name, count)) >> np.uint64(40)
    u = bits.astype(np.float64) * (1.0 / (1 << 24))
    return (lo + (hi - lo) * u).astype(np.float32).reshape(shape)


def seeded_bits(seed: int, op: str, name: str, shape) -> np.ndarray:
    count = int(np.prod(shape))
    bits = _splitmix64(_stream(seed, op, name, count)) >> np.uint64(63)
    return bits.astype(bool).reshape(shape)


def seeded_ints(seed: int, op: str, name: str, shape, lo: int, hi: int) -> np.ndarray:
    """int32 uniform on [lo, hi) (hi - lo < 2^32; the modulo's bias is below 2^-32)."""
    count = int(np.prod(shape))
    bits = _splitmix64(_stream(seed, op, name, count))
    return (np.int64(lo) + (bits % np.uint64(hi - lo)).astype(np.int64)).astype(np.int32).reshape(shape)
