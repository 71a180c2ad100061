"""The quick launch path: the compile-handle cache in front of the printed-IR key,
and the argument fill (native for NumPy arrays and Python numbers, Python for
torch tensors, check_args for everything else). Every path writes the same
argument block and gives the same bits; every bad argument is refused before
anything runs, naming the argument."""
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from cohort import Buffer, Const, f32, global_id, i32, kernel, u32
from cohort.backend import codegen, compiler, launch_plan
from cohort.backend.compiler import PreparedLaunch, compile_kernel
from cohort.backend.context import SLOT_BEGIN, SLOT_END, SLOT_N, abi_slots
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.backend.variant import parse_variant
from cohort.refimpl import ops
from cohort.refimpl.errors import KernelError
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.launch_check import check_args
from cohort.verify.checksum import bitwise_equal


@kernel(block=32)
def axpb(x: Buffer[f32], y: Buffer[f32], a: f32, k: i32, u: u32, cols: Const[int]):
    i = global_id()
    if i < len(y):
        y[i] = x[i] * a + f32(k + cols) + f32(u)


def _args(n=40):
    return {"x": np.arange(n, dtype=np.float32) * np.float32(0.37), "y": np.full(n, -7.0, np.float32),
            "a": 2.5, "k": -3, "u": 4}


def _expected(args, n, cols=2):
    ref = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    interpret(axpb.ir, n, ref, {"cols": cols})
    return ref["y"]


# ================================================================ compile handles

def test_a_built_kernel_is_served_from_the_handle_cache():
    ck = compile_kernel(axpb, {"cols": 2}, "packet", n=40)
    assert compile_kernel(axpb, {"cols": 2}, "packet", n=40) is ck
    assert compile_kernel(axpb, {"cols": 2}, parse_variant("packet"), n=40) is ck   # either spelling
    assert compile_kernel(axpb.ir, {"cols": 2}, "packet", n=40) is ck               # the IR itself
    assert compile_kernel(axpb, {"cols": 2}, "packet", n=80) is ck                  # same divisibility
    key = compiler._handle_key(axpb.ir, {"cols": 2}, codegen.resolve(parse_variant("packet")), 40)
    assert compiler._handles[key] is ck


def test_what_changes_the_code_changes_the_handle():
    base = compile_kernel(axpb, {"cols": 2}, "packet", n=64)
    assert base.code.full_blocks
    assert compile_kernel(axpb, {"cols": 3}, "packet", n=64) is not base
    assert compile_kernel(axpb, {"cols": 2}, "whole", n=64) is not base
    assert compile_kernel(axpb, {"cols": 2}, "packet-masked", n=64) is not base
    general = compile_kernel(axpb, {"cols": 2}, "packet", n=40)       # 40 is no multiple of 32
    assert general is not base and not general.code.full_blocks
    assert compile_kernel(axpb, {"cols": 2}, "packet") is general      # n unknown: the general build
    with inject_bug_TESTING_ONLY("tree_order"):
        buggy = compile_kernel(axpb, {"cols": 2}, "packet", n=64)
        assert buggy is not base and buggy.code is not base.code
        assert compile_kernel(axpb, {"cols": 2}, "packet", n=64) is buggy
    assert compile_kernel(axpb, {"cols": 2}, "packet", n=64) is base


def test_grain_and_workers_share_the_code_but_not_the_handle():
    a = compile_kernel(axpb, {"cols": 2}, "packet")
    b = compile_kernel(axpb, {"cols": 2}, "packet,grain=1,workers=2")
    assert a is not b and a.code is b.code and b.variant.workers == 2


def test_constants_of_another_type_are_not_served_a_cached_build():
    compile_kernel(axpb, {"cols": 1})
    with pytest.raises(KernelError, match="must be an int"):
        compile_kernel(axpb, {"cols": True})      # True == 1 and hashes alike: the key holds the type
    with pytest.raises(KernelError, match="must be an int"):
        compile_kernel(axpb, {"cols": 1.0})


def test_a_replaced_ir_is_a_new_key():
    @kernel(block=32)
    def body(y: Buffer[f32]):
        y[global_id()] = 1.0

    @kernel(block=32)
    def other(y: Buffer[f32]):
        y[global_id()] = 2.0

    first = compile_kernel(body, None, "whole")
    body.ir = other.ir        # a KernelFunction is mutable; compile reads .ir each time
    second = compile_kernel(body, None, "whole")
    assert second is not first
    y = np.zeros(32, np.float32)
    second.launch(32, {"y": y})
    assert (y == 2.0).all()


def test_unhashable_constants_still_compile_and_report():
    with pytest.raises(KernelError):
        compile_kernel(axpb, {"cols": [2]})


# ================================================================ the fill

def _block_of(p: PreparedLaunch, kernel_ir) -> dict:
    """The argument block's parameter slots and launch size (not the per-block addresses)."""
    slots = abi_slots(kernel_ir)
    out = {"n": int(p.args[SLOT_N]), "begin": int(p.args[SLOT_BEGIN]), "end": int(p.args[SLOT_END])}
    for name, s in slots.items():
        if name != "__count__":
            out[name] = tuple(int(p.args[i]) for i in s)
    return out


def _checked_block(ck, n, args):
    buffers, scalars = check_args(ck.kernel, n, args)
    return _block_of(PreparedLaunch(ck, ck.code_for(n), n, buffers, scalars), ck.kernel)


def test_layouts_confirmed_so_the_native_fill_runs():
    assert launch_plan._HEAD_OK and launch_plan._NATIVE_OK
    ck = compile_kernel(axpb, {"cols": 2}, "whole")
    p = PreparedLaunch(ck, ck.code)
    assert ck.plan.fill(p, 40, _args()) and ck.plan._fn is not None


F32_VALUES = [0.0, -0.0, 1.0, -2.5, 1e-6, 0.1, 1 / 3, 3.4028234663852886e38, 3.4028235e38, 1e-39, 1e-45,
              7e-46, 2.0 ** -149, 2.0 ** -150, 1.0000000596046448, 1.0000001788139343, float("inf"), -float("inf"),
              123456789.0, -1e30]


@pytest.mark.parametrize("python_fill", [False, True], ids=["native", "python"])
def test_quick_block_equals_checked_block(python_fill, monkeypatch):
    ck = compile_kernel(axpb, {"cols": 2}, "whole")
    if python_fill:
        monkeypatch.setattr(ck.plan, "native", 0)
        monkeypatch.setattr(ck.plan, "_fn", None)
    rng = np.random.default_rng(5)
    values = F32_VALUES + [float(v) for v in rng.standard_normal(200) * 10.0 ** rng.integers(-40, 39, 200)]
    ints = [(0, 0), (-1, 1), (2 ** 31 - 1, 2 ** 32 - 1), (-2 ** 31, 2 ** 31), (17, 12345)]
    for i, a in enumerate(values):
        k, u = ints[i % len(ints)]
        args = {**_args(), "a": a, "k": k, "u": u}
        p = PreparedLaunch(ck, ck.code)
        assert ck.plan.fill(p, 40, args), a
        assert _block_of(p, ck.kernel) == _checked_block(ck, 40, args), a


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_values_the_quick_path_leaves_to_check_args_launch_the_same():
    """NaN payloads, f32 overflow, NumPy scalars and n, a subclass, a 2-D array."""
    ck = compile_kernel(axpb, {"cols": 2}, "whole")
    odd = [{"a": float("nan")}, {"a": 1e39}, {"a": -1e300}, {"a": np.float32(0.1)}, {"a": 3},
           {"k": np.int64(-5)}, {"u": np.uint32(7)}, {"k": 4.0},
           {"x": np.arange(40, dtype=np.float32).reshape(5, 8)}, {"x": np.ma.MaskedArray(np.ones(40, np.float32))}]
    for change in odd:
        args = {**_args(), **change}
        p = PreparedLaunch(ck, ck.code)
        try:
            quick = ck.plan.fill(p, 40, args)
        except OverflowError:
            quick = False
        assert not quick or _block_of(p, ck.kernel) == _checked_block(ck, 40, args), change
        want = _expected(args, 40)
        ck.launch(np.int64(40), args)
        assert bitwise_equal(args["y"], want), change


def _op_args(op, shape, make):
    inputs = op.make_inputs(shape, 0)
    bufs = ops.allocate(op, shape, inputs)
    return {k: make(v) for k, v in bufs.items()}


@pytest.mark.parametrize("variant", ["whole", "packet", "packet,grain=1,workers=2", "packet,grain=auto,workers=2"])
def test_fresh_reused_and_torch_arguments_give_the_same_bits(variant):
    op = ops.get("rmsnorm")
    for shape in [(17, 65), (34, 128), (3, 5)]:
        launch = op.launch(shape)
        ref = ops.run_reference(op, shape, op.make_inputs(shape, 0)).reshape(-1)
        ck = compile_kernel(op.kernel, launch.consts, variant, n=launch.n)
        reused = _op_args(op, shape, lambda a: a)
        for _ in range(3):
            reused[op.output][:] = 0
            ck.launch(launch.n, {**reused, **launch.scalars})
            assert bitwise_equal(reused[op.output], ref), (shape, "reused")
        for _ in range(3):
            fresh = _op_args(op, shape, lambda a: a.copy())
            out = ck.launch(launch.n, {**fresh, **launch.scalars})
            assert out[op.output] is fresh[op.output]
            assert bitwise_equal(fresh[op.output], ref), (shape, "fresh")
        try:
            import torch
        except ImportError:
            continue
        for _ in range(2):
            tens = _op_args(op, shape, lambda a: torch.from_numpy(a.copy()))
            out = ck.launch(launch.n, {**tens, **launch.scalars})
            assert out[op.output] is tens[op.output]
            assert bitwise_equal(tens[op.output].numpy(), ref), (shape, "torch")


def test_general_and_whole_block_builds_alternate_on_one_compiled_kernel():
    ck = compile_kernel(axpb, {"cols": 2}, "packet", n=64)
    assert ck.code.full_blocks
    for n in (64, 40, 64, 1, 0, 96, 33):
        args = _args(100)
        want = _expected(args, n)
        ck.launch(n, args)
        assert bitwise_equal(args["y"], want), n


def test_a_prepared_launch_is_never_refilled_by_later_launches():
    ck = compile_kernel(axpb, {"cols": 2}, "whole")
    args = _args()
    p = ck.prepare(40, args)
    before = p.args.copy()
    for _ in range(6):
        ck.launch(40, _args())
    assert np.array_equal(p.args, before)
    p.run()
    assert bitwise_equal(args["y"], _expected(_args(), 40))


def test_launches_from_threads_on_one_compiled_kernel():
    ck = compile_kernel(axpb, {"cols": 2}, "packet")
    failures = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            n = int(rng.integers(1, 300))
            args = {"x": rng.standard_normal(n).astype(np.float32), "y": np.zeros(n, np.float32),
                    "a": float(rng.standard_normal()), "k": int(rng.integers(-9, 9)), "u": int(rng.integers(0, 9))}
            want = args["x"] * np.float32(args["a"]) + np.float32(args["k"] + 2) + np.float32(args["u"])
            ck.launch(n, args)
            if not bitwise_equal(args["y"], want):
                failures.append((seed, n))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_numpy_launches_never_import_torch():
    code = ("import sys, numpy as np\n"
            "from cohort.backend.compiler import compile_kernel\n"
            "from tests.test_launch_path import axpb, _args\n"
            "ck = compile_kernel(axpb, {'cols': 2}, 'packet')\n"
            "ck.launch(40, _args())\n"
            "ck.launch(40, {**_args(), 'k': np.int64(3)})\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root, env=env)
    assert r.returncode == 0, r.stderr


# ================================================================ refusals

def _readonly(a):
    a = a.copy()
    a.setflags(write=False)
    return a


BAD = [
    ("wrong dtype", {"x": np.zeros(40, np.float64)}, "buffer x must have dtype float32"),
    ("big-endian", {"x": np.zeros(40, ">f4")}, "buffer x must have dtype float32"),
    ("non-contiguous view", {"x": np.zeros(80, np.float32)[::2]}, "buffer x is not C-contiguous"),
    ("read-only output", {"y": _readonly(np.zeros(40, np.float32))}, "buffer y is read-only"),
    ("a list", {"x": [0.0] * 40}, "buffer x must be a NumPy array"),
    ("scalar as a string", {"a": "2.5"}, "scalar a must be a f32 number"),
    ("bool scalar", {"k": True}, "scalar k must be a i32 number"),
    ("array as a scalar", {"a": np.zeros(1, np.float32)}, "scalar a must be a f32 number"),
    ("fractional i32", {"k": 1.5}, "scalar k is i32"),
    ("u32 negative", {"u": -1}, "scalar u=-1 does not fit in u32"),
    ("i32 too big", {"k": 2 ** 31}, "scalar k=2147483648 does not fit in i32"),
    ("extra argument", {"zz": 1}, "unknown argument(s) ['zz']"),
    ("constant at launch", {"cols": 2}, "unknown argument(s) ['cols']"),
]


@pytest.mark.parametrize("variant", ["whole", "packet"])
@pytest.mark.parametrize("label,change,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_arguments_are_refused_naming_them(label, change, needle, variant):
    ck = compile_kernel(axpb, {"cols": 2}, variant)
    args = {**_args(), **change}
    y = args["y"]
    with pytest.raises(KernelError) as ei:
        ck.launch(40, args)
    assert needle in str(ei.value) and "axpb" in str(ei.value), str(ei.value)
    assert (y == -7.0).all() or not y.flags.writeable
    with pytest.raises(KernelError):
        ck.prepare(40, args)


def test_missing_argument_and_bad_n():
    ck = compile_kernel(axpb, {"cols": 2}, "packet")
    args = _args()
    del args["u"]
    with pytest.raises(KernelError, match=r"missing argument\(s\) \['u'\]"):
        ck.launch(40, args)
    for n in (-1, 2 ** 31, 1.0, True, "40", None):
        with pytest.raises(KernelError, match="thread count"):
            ck.launch(n, _args())


def test_overlapping_buffers_are_named():
    ck = compile_kernel(axpb, {"cols": 2}, "packet")
    a = np.zeros(100, np.float32)
    for x, y in [(a[:40], a[30:70]), (a[:40], a[:40]), (a, a[10:50])]:
        with pytest.raises(KernelError, match="buffers x and y overlap"):
            ck.launch(40, {**_args(), "x": x, "y": y})
    b = np.zeros(40, np.float32)
    with pytest.raises(KernelError, match="buffers x and y overlap"):
        ck.launch(40, {**_args(), "x": b, "y": b})      # one owning array passed twice
    assert not a.any() and not b.any()
    ck.launch(40, {**_args(), "x": a[:40], "y": a[40:80]})   # adjacent, disjoint: fine
    assert (a[40:80] == np.float32(3.0)).all()   # 0 * 2.5 + (-3 + 2) + 4


def test_torch_refusals_name_the_argument():
    torch = pytest.importorskip("torch")
    ck = compile_kernel(axpb, {"cols": 2}, "packet")
    x = torch.arange(40, dtype=torch.float32)
    y = torch.full((40,), -7.0)
    cases = [
        ({"x": x.double()}, "buffer x must have dtype float32, got torch.float64"),
        ({"x": x.to(torch.bfloat16)}, "buffer x must have dtype float32, got torch.bfloat16"),
        ({"x": torch.zeros(80)[::2]}, "buffer x: tensor is not contiguous"),
        ({"y": torch.zeros(40, requires_grad=True)}, "buffer y: tensor requires grad"),
        ({"x": x, "y": x}, "buffers x and y overlap"),
        ({"x": torch._neg_view(x)}, "buffer x: tensor has its negative bit set"),
        ({"x": torch.zeros(80)[:40], "y": torch.zeros(80)}, None),
    ]
    for change, needle in cases:
        args = {**_args(), "x": x, "y": y, **change}
        if needle is None:
            ck.launch(40, args)
            continue
        with pytest.raises(KernelError) as ei:
            ck.launch(40, args)
        assert needle in str(ei.value), str(ei.value)
        assert (y == -7.0).all()
    # read-only use of a tensor that requires grad is allowed: the kernel does not write x
    xg = torch.arange(40, dtype=torch.float32, requires_grad=True)
    ck.launch(40, {**_args(), "x": xg, "y": y})
    assert torch.equal(y, xg.detach() * 2.5 + 3.0)
    # a parameter (a Tensor subclass) takes the checked path
    w = torch.nn.Parameter(torch.zeros(40), requires_grad=False)
    ck.launch(40, {**_args(), "x": xg.detach(), "y": w})
    assert torch.equal(w.detach(), xg.detach() * 2.5 + 3.0)
