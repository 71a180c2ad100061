"""The row operators' two formulations (issue 12, DESIGN §4): "stream" reads its
inputs from memory in every pass (the elementwise operators: one thread per
element or pair); "private" is one block per row, each thread holding its
striped slice of the row in private arrays, CUB style, under the form's own
launch. Both forms compute the same float32
operations in the same order, so their outputs are bit-identical; in the private
form the private layout decides the code: with private=cohort a packet's lanes
reach consecutive private addresses (vector loads and stores), with
private=thread each lane's array is contiguous on its own (gathers and scatters
across lanes, stride = the array's size)."""
import functools
import itertools
import re

import numpy as np
import pytest

from cohort.backend.claims import Lanes, Site
from cohort.backend.compiler import compile_kernel
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
from cohort.refimpl.ir import Collective, Op, ParamKind, Store, stmt_exprs, walk_expr, walk_stmts
from cohort.verify.checksum import bitwise_equal, first_difference
from cohort.verify.compare import verify_build

# the operators with a private form: the row operators (the rotary operators rope_half and
# rope_pairs have one formulation each; attention's forms are tests/test_attention_forms.py's)
ROW_OPS = [n for n, op in ops.OPERATORS.items() if "private" in (op.form, *(f[0] for f in op.forms))]
ELEMENTWISE = ["swiglu", "gelu_residual", "rope", "gelu", "gelu_tanh"]
LANES = (4, 8, 16)
# odd tails: C not a multiple of the block, R*C not a multiple of it, C < 32; one long row
SHAPES = {"rope": [(3, 64), (17, 66), (129, 768), (5, 20)]}
DEFAULT_SHAPES = [(3, 63), (17, 65), (129, 768), (5, 20)]
MATRIX_SHAPE = {"rope": (3, 126)}   # 63 pairs: one full item and a partial one, as 3x63
MATRIX = sorted({parse_variant("whole").name} | {
    parse_variant(f"lanes={l},full_packet={fp},predicated={pr},private={pv}").name
    for l, fp, pr, pv in itertools.product(LANES, ("on", "off"), ("on", "off"), ("cohort", "thread"))})


def _ids(v):
    return ops.fmt_shape(v) if isinstance(v, tuple) else str(v)


@functools.lru_cache(maxsize=None)
def references(name: str, shape: tuple):
    """(inputs, stream form's interpreter output, private form's interpreter output)."""
    op = ops.get(name)
    inputs = op.make_inputs(shape, 0)
    return (inputs, ops.run_reference(op, shape, inputs),
            ops.run_reference(op.with_form("private"), shape, inputs))


def build(name: str, form: str, shape: tuple, variant: str):
    op = ops.get(name, form=form)
    launch = op.launch(shape)
    return op, launch, compile_kernel(op.kernel, launch.consts, variant, n=launch.n)


# the layout tests compile the same builds (the code test, then the output test); compile once
cached_build = functools.lru_cache(maxsize=None)(build)


def run(op, shape, launch, ck, inputs, expected) -> np.ndarray:
    """The build's output, checked against `expected` (the one comparison path)."""
    verdict = verify_build(ck, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars},
                           {op.output: expected}, claims=False)
    assert verdict.ok, f"{op.name}: {verdict.describe()}"
    return verdict.native[op.output]


def normalised_ir(ck) -> str:
    return re.sub(r'"?' + re.escape(ck.symbol) + r'"?', "ENTRY", ck.llvm_ir)


def private_accesses(ck) -> list:
    """(kind, array, access) of every private load and store the lowering annotated."""
    return [(c.site.value, c.name, c) for c in ck.annotations.values() if c.site in (Site.PLOAD, Site.PSTORE)]


# ------------------------------------------------------------------ the forms exist
def _params(kernel, *kinds):
    return [(p.name, p.kind, p.dtype) for p in kernel.ir.params if p.kind in kinds]


@pytest.mark.parametrize("name", ROW_OPS)
def test_every_row_operator_has_a_private_form_with_the_same_buffers(name):
    stream, private = ops.get(name), ops.get(name, form="private")
    assert stream.form == "stream" and private.form == "private"
    assert private.kernel is not stream.kernel
    assert _params(private.kernel, ParamKind.BUFFER) == _params(stream.kernel, ParamKind.BUFFER)
    assert private.kernel.block == stream.kernel.block
    assert any(type(s).__name__ == "Private" for s in private.kernel.ir.body)
    assert not any(type(s).__name__ == "Private" for s in stream.kernel.ir.body)
    # each form's launch names exactly its kernel's Const and scalar parameters
    shape = SHAPES.get(name, DEFAULT_SHAPES)[1]
    for op in (stream, private):
        launch = op.launch(shape)
        assert sorted(launch.consts) == sorted(p[0] for p in _params(op.kernel, ParamKind.CONST))
        assert sorted(launch.scalars) == sorted(p[0] for p in _params(op.kernel, ParamKind.SCALAR))
    # with_form swaps kernel and launch together, both ways, any number of times
    back = private.with_form("stream")
    assert back.kernel is stream.kernel and back.launch is stream.launch
    again = back.with_form("private")
    assert again.kernel is private.kernel and again.launch is private.launch
    with pytest.raises(ops.ShapeError, match="no form 'tiled'"):
        ops.get(name, form="tiled")


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm", "masked_softmax"])
def test_a_form_given_without_a_launch_runs_on_the_operators(name):
    stream = ops.get(name)
    assert stream.with_form("private").launch is stream.launch


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_private_forms_are_block_per_row_tiles(name):
    """One block of B threads per row with cols a Const (the stream form: one thread per
    element or pair); the kernel loads its inputs into private arrays, computes there,
    and stores from them: no top-level statement both reads and writes a buffer, and
    every buffer read precedes every buffer write."""
    stream, private = ops.get(name), ops.get(name, form="private")
    B = private.kernel.block
    for shape in SHAPES.get(name, DEFAULT_SHAPES):
        assert private.launch(shape).n == shape[0] * B
        assert private.launch(shape).consts == {"cols": shape[1]}
        assert stream.launch(shape).n == shape[0] * shape[1] // (2 if name == "rope" else 1)
    loads, stores = [], []
    for top in private.kernel.ir.body:
        inner = list(walk_stmts([top]))
        loads.append(any(n.op is Op.LOAD for s in inner for e in stmt_exprs(s) for n in walk_expr(e)))
        stores.append(any(isinstance(s, Store) for s in inner))
    assert not any(l and w for l, w in zip(loads, stores))
    last_load = max(i for i, l in enumerate(loads) if l)
    first_store = min(i for i, w in enumerate(stores) if w)
    assert last_load < first_store
    computes = private.kernel.ir.body[last_load + 1:first_store]
    assert any(type(s).__name__ in ("For", "If") for s in computes)


def _loads_by_phase(kernel_ir) -> list:
    """[set of buffers loaded] per phase (top-level statements between collectives)."""
    phases = [set()]
    for top in kernel_ir.body:
        for s in walk_stmts([top]):
            for e in stmt_exprs(s):
                phases[-1] |= {n.arg for n in walk_expr(e) if n.op is Op.LOAD}
        if isinstance(top, Collective):
            phases.append(set())
    return phases


@pytest.mark.parametrize("name", ["rmsnorm", "layernorm", "masked_softmax"])
def test_row_norms_read_the_row_in_one_pass(name):
    """x (and the mask) are read in the first phase only; later phases use the private copy."""
    row_inputs = {"x", "mask"} & set(ops.get(name).inputs)
    stream = _loads_by_phase(ops.get(name).kernel.ir)
    private = _loads_by_phase(ops.get(name, form="private").kernel.ir)
    assert len(stream) == len(private) >= 2
    assert all(row_inputs <= p for p in stream)
    assert row_inputs <= private[0] and not any(row_inputs & p for p in private[1:])


def test_attention_has_no_private_form():
    # attention's forms are register shapes of one code (tests/test_attention_forms.py), not
    # the row operators' private formulation
    assert "private" not in (f[0] for f in ops.get("attention").forms)


# ------------------------------------------------------------------ same bits, both forms
@pytest.mark.parametrize("name,shape", [(n, s) for n in ROW_OPS for s in SHAPES.get(n, DEFAULT_SHAPES)], ids=_ids)
def test_interpreter_gives_both_forms_the_same_bits(name, shape):
    _, stream, private = references(name, shape)
    assert bitwise_equal(private, stream), f"{name} {shape}: first difference {first_difference(private, stream)}"
    assert not np.isnan(stream).any()


# ------------------------------------------------------------------ the layouts differ in code
# 17x65: each thread's items end in a partial one; 129x768: B divides C, no partial item
@pytest.mark.parametrize("name,lanes,shape", [(n, l, SHAPES.get(n, DEFAULT_SHAPES)[i]) for n in ROW_OPS
                                              for l in LANES for i in (1, 2)], ids=_ids)
def test_private_layouts_differ_in_code(name, lanes, shape):
    _, _, cohort = cached_build(name, "private", shape, f"lanes={lanes},private=cohort")
    _, _, thread = cached_build(name, "private", shape, f"lanes={lanes},private=thread")
    assert normalised_ir(cohort) != normalised_ir(thread)
    fc, ft = cohort.facts, thread.facts
    # cohort: every private access is one vector load or store; thread: a gather or scatter
    assert fc["gathers"] == 0 and fc["scatters"] == 0, fc
    assert ft["gathers"] > 0 and ft["scatters"] > 0, ft
    sizes = {s.name: int(s.size.arg) for s in thread.kernel.body if type(s).__name__ == "Private"}
    acc_c, acc_t = private_accesses(cohort), private_accesses(thread)
    assert acc_c and len(acc_c) == len(acc_t)
    assert all(c.lanes is Lanes.CONTIGUOUS for _, _, c in acc_c), acc_c
    for kind, arr, c in acc_t:   # lane l's element k at l*size + k: lanes `size` elements apart
        assert c.lanes is (Lanes.GATHER if kind == "pload" else Lanes.SCATTER) and c.stride == sizes[arr], acc_t


@pytest.mark.parametrize("name", ROW_OPS)
def test_stream_form_has_no_private_layout(name):
    """The A/A the issue found: without private arrays the knob changes nothing."""
    shape = SHAPES.get(name, DEFAULT_SHAPES)[1]
    _, _, cohort = build(name, "stream", shape, "lanes=8,private=cohort")
    _, _, thread = build(name, "stream", shape, "lanes=8,private=thread")
    assert normalised_ir(cohort) == normalised_ir(thread)


# ------------------------------------------------------------------ ... and agree in output
@pytest.mark.parametrize("name,lanes,shape", [(n, l, s) for n in ROW_OPS for l in LANES
                                              for s in SHAPES.get(n, DEFAULT_SHAPES)], ids=_ids)
def test_private_layouts_agree_bit_for_bit(name, lanes, shape):
    inputs, stream, private = references(name, shape)
    for layout in ("cohort", "thread"):
        op, launch, ck = cached_build(name, "private", shape, f"lanes={lanes},private={layout}")
        y = run(op, shape, launch, ck, inputs, private).reshape(stream.shape)
        assert bitwise_equal(y, stream)


# ------------------------------------------------------------------ the whole variant matrix
# The stream form runs this matrix at these shapes in test_variants (test_full_matrix_on_tail_sizes);
# here the private form, against the stream form's interpreter output, with the lowering's lane
# claims checked by the interpreter. Private launches are whole blocks (the specialised build)
# of one full item and a partial one per thread.
@pytest.mark.parametrize("name,variant", [(n, v) for n in ROW_OPS for v in MATRIX], ids=_ids)
def test_private_form_on_the_variant_matrix(name, variant):
    shape = MATRIX_SHAPE.get(name, (3, 63))
    inputs, stream, _ = references(name, shape)
    op, launch, ck = build(name, "private", shape, variant)
    label = f"{name}/private {shape} [{ck.variant.label}]{' [full blocks]' if ck.code.full_blocks else ''}"
    verdict = verify_build(ck, launch.n, {**ops.allocate(op, shape, inputs), **launch.scalars},
                           {op.output: stream}, label=label)
    assert verdict.ok, verdict.describe()
