"""The operator library: the operators of DESIGN §4.

Each operator module holds its kernel (written in the frontend as a GPU
programmer would), its launch geometry, a seeded input generator and an
independent float64 oracle. `run_reference` runs the interpreter on an
operator's inputs.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..interpreter import interpret
from . import (
    attention,
    attention_backward,
    backward,
    cumsum,
    gelu,
    gelu_residual,
    histogram,
    layernorm,
    masked_softmax,
    matmul,
    rmsnorm,
    rope,
    rotary,
    swiglu,
    transpose,
)
from .base import TAGS, Launch, Operator, ShapeError, fmt_shape

ROW_SIZES = ((17, 65), (129, 768), (257, 1538), (1024, 4097), (3, 63), (64, 256), (137, 1023),
             (513, 2051), (17, 16384))
ATTENTION_SIZES = ((1, 4, 2, 16, 32, 16, 16), (1, 4, 1, 64, 128, 32, 32))
# rotary: N x S x D x R - full and partial rotation, head dimensions of small and large models
ROTARY_SIZES = ((8, 17, 64, 64), (4, 33, 80, 32), (32, 128, 128, 128), (1, 1, 2, 2))
# M x K x N: small, ragged and prime, and an LLM projection's row block
MATMUL_SIZES = ((64, 64, 64), (1, 1, 1), (37, 129, 70), (17, 131, 257), (256, 512, 256))
CUMSUM_SIZES = ((17, 65), (1, 1), (3, 63), (129, 768), (8, 4097))
# L x BINS: indices, bins (out-of-range indices included at every size)
HISTOGRAM_SIZES = ((1000, 64), (1, 1), (4097, 257), (100003, 1000), (65536, 16384))
TRANSPOSE_SIZES = ((1, 64, 64), (1, 1, 1), (3, 37, 70), (2, 129, 257), (1, 1024, 1000))


def _even(sizes):
    """rope rounds C up to even (DESIGN §4)."""
    return tuple((r, c + c % 2) for r, c in sizes)


OPERATORS = {op.name: op for op in [
    replace(rmsnorm.OP, seed_sizes=ROW_SIZES),
    replace(layernorm.OP, seed_sizes=ROW_SIZES),
    replace(masked_softmax.OP, seed_sizes=ROW_SIZES),
    replace(swiglu.OP, seed_sizes=ROW_SIZES),
    replace(gelu_residual.OP, seed_sizes=ROW_SIZES),
    replace(rope.OP, seed_sizes=_even(ROW_SIZES)),
    replace(attention.OP, seed_sizes=ATTENTION_SIZES),
    replace(gelu.GELU, seed_sizes=ROW_SIZES),
    replace(gelu.GELU_TANH, seed_sizes=ROW_SIZES),
    replace(rotary.ROPE_HALF, seed_sizes=ROTARY_SIZES),
    replace(rotary.ROPE_PAIRS, seed_sizes=ROTARY_SIZES),
    replace(attention.CAUSAL_OP, seed_sizes=ATTENTION_SIZES),
    # cooperative operators (issue 24): shared memory, barriers, atomics
    replace(matmul.OP, seed_sizes=MATMUL_SIZES),
    replace(cumsum.OP, seed_sizes=CUMSUM_SIZES),
    replace(histogram.OP, seed_sizes=HISTOGRAM_SIZES),
    replace(transpose.OP, seed_sizes=TRANSPOSE_SIZES),
]}


# Backward operators (issue 26, autograd: cohort.torch's gradients). Kept apart from
# OPERATORS - the benchmark suites and the forward operators' test matrix iterate that -
# but found by `get` (and so by `cohort run`) like any operator.
BACKWARD_SIZES = ((17, 65), (3, 63), (64, 256))
BACKWARD = {op.name: op for op in [
    *(replace(op, seed_sizes=BACKWARD_SIZES) for op in backward.BACKWARD),
    *(replace(op, seed_sizes=ATTENTION_SIZES) for op in attention_backward.BACKWARD),
]}


class UnknownOperator(KeyError):
    """An operator name (or NAME:STORAGE form) that names nothing; the message lists what does."""
    def __str__(self):
        return self.args[1] if len(self.args) > 1 else \
            f"unknown operator {self.args[0]!r}; operators are {', '.join(OPERATORS)}"


def storage_forms(op: Operator) -> tuple:
    """The storage suffixes `op` has: bf16 and f16 when it has an f32 buffer to re-type (its
    aux buffers stay f32, ops/storage.py), none otherwise (histogram, transpose's int forms)."""
    from ..ir import STORAGE_DTYPES, DType
    retypable = any(p.dtype is DType.F32 and p.name not in op.aux for p in op.kernel.ir.buffers)
    return tuple(sorted(d.value for d in STORAGE_DTYPES)) if retypable else ()


def forms(name: str) -> tuple:
    """Every spelling `get` accepts for the operator `name`: NAME, then NAME:bf16, NAME:f16."""
    op = OPERATORS.get(name) or BACKWARD.get(name)
    if op is None:
        raise UnknownOperator(name)
    return (name, *(f"{name}:{s}" for s in storage_forms(op)))


def get(name: str, form: str = None) -> Operator:
    """The operator `name`; with `form`, in that formulation (see Operator.with_form).
    `name:bf16` / `name:f16`: the operator over bf16/f16 buffers (ops/storage.py). A form the
    operator does not have raises UnknownOperator naming the forms it has."""
    base, _, st = name.partition(":")
    op = OPERATORS.get(base) or BACKWARD.get(base)
    if op is None:
        raise UnknownOperator(base)
    if not st and name != base:
        raise UnknownOperator(name, f"operator form {name!r} ends in ':' with no storage type; "
                                    f"{base}'s forms are {', '.join(forms(base))}")
    if st:
        valid = forms(base)
        if name not in valid:
            if ":" in st:
                why = "has more than one storage suffix"
            elif len(valid) == 1:
                why = f"is not a form of {base}, which has no f32 buffer to store as bf16 or f16"
            elif f"{base}:{st.lower()}" in valid:
                why = "must be spelt in lower case"
            else:
                why = f"has an unknown storage type {st!r}"
            raise UnknownOperator(name, f"operator form {name!r} {why}; {base}'s forms are {', '.join(valid)}")
        from .storage import storage_operator, storage_type
        op = storage_operator(op, storage_type(st))
    return op if form is None else op.with_form(form)


def tagged(tag: str) -> tuple:
    """The operators carrying `tag` (base.TAGS), in OPERATORS' order."""
    if tag not in TAGS:
        raise KeyError(f"unknown tag {tag!r}; tags are {', '.join(TAGS)}")
    return tuple(op for op in OPERATORS.values() if tag in op.tags)


def block_dependent(kernel) -> bool:
    """Whether a kernel's meaning depends on its block size: it reads thread_id, block_id
    or block_size, or reduces over the block. Re-blocking such an operator changes its
    launch geometry (one block per row) and its reduction tree, not just its schedule."""
    from ..ir import stmt_def, stmt_exprs, walk_expr, walk_stmts
    from ..opdefs import OPDEFS
    ir = getattr(kernel, "ir", kernel)
    for s in walk_stmts(ir.body):
        if stmt_def(s).blocking:
            return True
        for e in stmt_exprs(s):
            for x in walk_expr(e):
                if OPDEFS[x.op].blocking:
                    return True
    return False


def allocate(op: Operator, shape, inputs: dict) -> dict:
    """All buffers of one launch, flattened (views of `inputs`), output and aux buffers zeroed."""
    bufs = {n: np.ascontiguousarray(a).reshape(-1) for n, a in inputs.items()}
    shapes = op.buffer_shapes(shape)
    for name in (*op.aux, op.output):
        bufs[name] = np.zeros(int(np.prod(shapes[name])), op.kernel.ir.param(name).dtype.np)
    return bufs


def run_reference(op: Operator, shape, inputs: dict) -> np.ndarray:
    """The interpreter's output for `inputs`, in the output's logical shape."""
    launch = op.launch(shape)
    bufs = allocate(op, shape, inputs)
    interpret(op.kernel.ir, launch.n, {**bufs, **launch.scalars}, launch.consts)
    return bufs[op.output].reshape(op.buffer_shapes(shape)[op.output])


def oracle_error(y: np.ndarray, ref: np.ndarray):
    """(max absolute error, max error relative to the largest |oracle| of its row).

    A row is the last dimension (attention: an output row). An all-zero
    oracle row (a fully masked softmax row) must be matched exactly.
    """
    from .storage import values  # a bf16 output (uint16 bits) or f16 one, as its values
    y64 = np.asarray(values(y), np.float64).reshape(-1, ref.shape[-1])
    r64 = np.asarray(ref, np.float64).reshape(-1, ref.shape[-1])
    err = np.abs(y64 - r64)
    err = np.where(np.isnan(err), np.inf, err)
    scale = np.abs(r64).max(axis=1, keepdims=True)
    rel = np.where(scale > 0, err / np.where(scale > 0, scale, 1.0), np.where(err > 0, np.inf, 0.0))
    return float(err.max(initial=0.0)), float(rel.max(initial=0.0))


__all__ = ["block_dependent", "oracle_error", "OPERATORS", "BACKWARD", "Operator", "Launch", "ShapeError", "get", "run_reference", "allocate",
           "fmt_shape", "tagged", "TAGS", "ROW_SIZES", "ATTENTION_SIZES", "ROTARY_SIZES", "UnknownOperator"]
