"""Any `@kernel` as a torch op: `kernel_op(name, kernel, ...)` registers
`torch.ops.<namespace>.<name>` (a custom_op with a fake implementation, so
torch.compile traces it without a graph break) and returns a function that
calls it.

    @cohort.kernel
    def axpy(x: Buffer[f32], y: Buffer[f32], out: Buffer[f32], a: f32):
        i = cohort.global_id()
        out[i] = a * x[i] + y[i]

    axpy_op = cohort.torch.kernel_op(
        "mylib::axpy", axpy, inputs=("x", "y"), output="out", scalars=("a",),
        shape=lambda x, y, a: x.shape,             # the output's shape
        launch=lambda x, y, a: (x.numel(), {}))    # (threads, Const values)
    z = axpy_op(x, y, 2.0)                         # or torch.ops.mylib.axpy(x, y, 2.0)

The op's arguments are the input tensors, then the scalars, in the order
given. Tensors are checked against their buffer's dtype, copied to
contiguous memory when they are not, and passed flattened; the output is
allocated with `shape` and the output buffer's dtype. `launch` returns the
launch size and the Const values (one build per distinct set, cached).

`verify` (default "first"): the first call of each new shape (n, the Const values
and every buffer's length) runs the interpreter on copies of the tensors before the
native build and compares every buffer (backend/verify_launch.py): a kernel the
interpreter rejects raises its error, a build that disagrees raises LaunchMismatch.
"always" checks every call, "never" none. The check costs one interpreter run per new
shape; later calls of a checked shape cost a set lookup.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..backend.verify_launch import check_mode, verified_launch
from ..refimpl.frontend import KernelFunction
from ..refimpl.ir import DType, ParamKind
from ..refimpl.launch_check import check_args, written_buffers
from . import checks
from .launch import build

_TORCH = {DType.F32: torch.float32, DType.I32: torch.int32, DType.BOOL: torch.bool,
          DType.BF16: torch.bfloat16, DType.F16: torch.float16}
_SCHEMA = {DType.F32: "float", DType.I32: "int", DType.U32: "int"}


def kernel_op(name: str, kernel: KernelFunction, *, inputs: Sequence[str], output: str,
              shape: Callable, launch: Callable, scalars: Sequence[str] = (), verify: str = "first") -> Callable:
    """Register `kernel` as the torch op `name` ("namespace::op"); see the module notes."""
    check_mode(verify)
    if not isinstance(kernel, KernelFunction):
        raise TypeError(f"kernel_op: kernel must be a @cohort.kernel function, got {type(kernel).__name__}")
    if not isinstance(name, str) or name.count("::") != 1:
        raise ValueError(f"kernel_op: name must be 'namespace::op', got {name!r}")
    params = {p.name: p for p in kernel.ir.params}
    inputs, scalars = tuple(inputs), tuple(scalars)
    buffers = [p.name for p in kernel.ir.params if p.kind is ParamKind.BUFFER]
    if sorted(inputs + (output,)) != sorted(buffers):
        raise ValueError(f"kernel_op: inputs {list(inputs)} and output {output!r} must name the kernel's "
                         f"buffers {buffers}, each once")
    wanted = [p.name for p in kernel.ir.params if p.kind is ParamKind.SCALAR]
    if sorted(scalars) != sorted(wanted):
        raise ValueError(f"kernel_op: scalars {list(scalars)} must name the kernel's scalar parameters {wanted}")
    written = written_buffers(kernel.ir) - {output}
    if written:
        raise ValueError(f"kernel_op: the kernel writes {sorted(written)}; an op's inputs are read only")
    for n in inputs + (output,):
        if params[n].dtype not in _TORCH:
            raise ValueError(f"kernel_op: buffer {n} is {params[n].dtype.value}; supported: f32, i32, bool, bf16, f16")
    out_dtype = _TORCH[params[output].dtype]
    opname = name.split("::")[1]
    schema = "(" + ", ".join([f"Tensor {n}" for n in inputs] +
                             [f"{_SCHEMA[params[s].dtype]} {s}" for s in scalars]) + ") -> Tensor"
    order = [p.name for p in kernel.ir.params if p.kind is ParamKind.BUFFER]
    verified: set = set()     # shapes checked against the interpreter (verify="first")
    scalar_order = wanted

    def check(args):
        if len(args) != len(inputs) + len(scalars):
            raise TypeError(f"{opname}: takes {len(inputs) + len(scalars)} arguments "
                            f"({', '.join(inputs + scalars)}), got {len(args)}")
        for n, t in zip(inputs, args):
            checks.tensor(opname, n, t, dtype=_TORCH[params[n].dtype])
        for s, val in zip(scalars, args[len(inputs):]):
            if params[s].dtype is DType.F32:
                checks.number(opname, s, val)
            elif isinstance(val, bool) or not isinstance(val, int):
                raise TypeError(f"{opname}: {s} must be an int, got {type(val).__name__}")

    def impl(*args):
        check(args)
        tensors = {n: t.contiguous() for n, t in zip(inputs, args)}
        values = dict(zip(scalars, args[len(inputs):]))
        out = torch.empty(tuple(shape(*args)), dtype=out_dtype)
        n, consts = launch(*args)
        tensors[output] = out
        if n:
            n = int(n)
            launcher = build(kernel.ir, dict(consts))
            tens, vals = tuple(tensors[b] for b in order), tuple(values[s] for s in scalar_order)
            key = (n, tuple(sorted(dict(consts).items())), tuple(t.numel() for t in tens))
            if verify == "always" or (verify == "first" and key not in verified):
                k = launcher.ck.kernel      # specialised on consts
                bufs, scal = check_args(k, n, {**dict(zip(order, tens)), **dict(zip(scalar_order, vals))})
                verified_launch(k, launcher.ck.variant.label, n, bufs, scal, lambda: launcher(n, tens, vals),
                                exact=not launcher.ck.variant.fast_math)
                verified.add(key)
            else:
                launcher(n, tens, vals)
        return out

    def fake(*args):
        check(args)
        return args[0].new_empty(tuple(shape(*args)), dtype=out_dtype)

    op = torch.library.custom_op(name, impl, mutates_args=(), schema=schema)
    op.register_fake(fake)
    ns = name.split("::")[0]

    def call(*args):
        return getattr(getattr(torch.ops, ns), opname)(*args)

    call.__name__ = opname
    call.__doc__ = f"torch.ops.{ns}.{opname}{schema}: cohort kernel {kernel.ir.name}"
    call.op = op
    return call
