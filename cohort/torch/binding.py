"""One record per torch op and one per operator's torch side, registered next to their
definitions (ops.py, coop_ops.py, autograd.py); every table that used to list operators by
name iterates these records instead.

    TorchOp     one `torch.ops.cohort.<name>`: its implementation, fake (meta) function, public
                function, backward, and how it is registered with the dispatcher. `register`
                does all of the torch.library work, so no module restates it.
    OpBinding   one refimpl operator (refimpl/ops, DESIGN §4) as a PyTorch user runs it: the
                cohort.torch op that computes it from the operator's inputs (same tensors, same
                order), the arguments that call needs beyond them, and the eager torch code an
                ML engineer writes for it (the Inductor and eager columns' graphs).

The operator's framework-free facts (kernel, shapes, oracle, tags such as `row`, `llm`,
`cooperative`) stay in its refimpl definition; `OpBinding.operator` names it and
`bindings(tag)` selects by its tags. Adding an operator: its refimpl module (and its line in
refimpl/ops OPERATORS), its TorchOp and OpBinding next to its torch implementation, its tests.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping, Optional

import torch

from ..refimpl import ops as registry


@dataclass(frozen=True)
class NativeCall:
    """What the native call path (native_call.py / native_call.cpp) checks and keys a call of an
    op by, one role per schema argument. Row and elementwise ops: 'x' first, a float32 tensor
    whose empty_like is the output; 'v' a float32 vector of x's last dimension; 's' a float32
    tensor of x's shape; 'm' a bool tensor of x's shape; 'e' a float in [0, FLT_MAX] (eps: part
    of the launch shape, the sign of a zero too). row: x has at least one dimension and its last
    one is a build constant. Any other op: 't' float32 tensors (the first one first) whose sizes
    are all part of the key, so that the output's sizes, recorded with the first launch of a key,
    are the same for every call of it; 'b' a bool, 'f' a float or None, 'i' an int or None (their
    values in the key); 'n' an argument that must be None. Non-contiguous tensors are copied
    first, as the implementations do. constants: tensors the implementation may launch with
    besides the arguments and the output (module-level, never written: their pointers stay in
    the argument block). Whatever the roles do not describe runs the op's Python implementation,
    and only a call whose launch reads no data-dependent value of its own (a tensor made from an
    argument's values) may be described: the key must decide the launch.

    composite: an op whose C++ kernel is written for it in native_call.cpp rather than keyed by
    its roles (which then only say what the eager front passes on): "rope_hf", whose tables'
    halves are compared on every call (a property of the data) and whose two launches go through
    the native rope op; `message` is the ValueError it raises when they differ."""
    roles: str
    row: bool = False
    constants: tuple = ()
    composite: str = ""
    message: str = ""

    def __post_init__(self):
        if self.composite:
            if self.composite != "rope_hf" or self.roles != "tttt" or self.row or not self.message:
                raise ValueError(f"NativeCall composite {self.composite!r}: only 'rope_hf', roles 'tttt', "
                                 f"with its message")
            return
        first, rest = self.roles[:1], self.roles[1:]
        if first == "x" and not set(rest) - set("vsme"):
            return
        if first == "t" and not self.row and not set(rest) - set("tbfin"):
            return
        raise ValueError(f"NativeCall roles {self.roles!r}: 'x' then v, s, m or e; or 't' then t, b, f, i or n")


@dataclass(frozen=True)
class TorchOp:
    name: str                          # cohort::<name>
    impl: Callable                     # the implementation; its annotations are the op's schema
    fake: Callable                     # the fake (meta) implementation: checks, then empty outputs
    function: Optional[Callable] = None   # cohort.torch.<name> (None: reached as torch.ops.cohort.<name> only)
    backward: Optional[Callable] = None   # torch.library.register_autograd's backward ...
    setup_context: Optional[Callable] = None   # ... and its setup_context (None: none)
    cpu_kernel: bool = True            # impl registered for CPU directly, in place of custom_op's
                                       # CompositeExplicitAutograd wrapper (which re-checks that the
                                       # output aliases no input, ~2 us a call)
    autograd_cpu: bool = True          # and the short AutogradCPU kernel (ops.fast_autograd) in front of it
    native: Optional[NativeCall] = None   # the native call path's description (None: Python kernels only)
    custom_op: Any = field(default=None, compare=False, repr=False)   # set by register


def _no_extra(shape) -> tuple:
    return ()


@dataclass(frozen=True)
class OpBinding:
    operator: str                      # the refimpl operator's name (refimpl/ops OPERATORS)
    eager: Callable                    # eager torch: f(*input tensors in operator order) -> output
    op: Optional[TorchOp] = None       # the cohort.torch op computing it (None: no op of cohort.torch does)
    kwargs: Mapping = field(default_factory=dict)   # keyword arguments of cohort.torch.<op> beyond the inputs
    extra: Callable = _no_extra        # shape -> positional arguments after the inputs (histogram: bins)
    schema_tail: tuple = ()            # torch.ops.cohort.<op>'s schema spells every argument: those after
                                       # the inputs and `extra` that the function fills in (defaults, kwargs)
    eager_shaped: bool = False         # `eager` is shape -> f: the eager code depends on the launch shape

    def __post_init__(self):
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    @property
    def tags(self) -> frozenset:
        return registry.get(self.operator).tags

    def call(self, shape, tensors, dispatch: bool = False) -> Callable:
        """A no-argument callable running the cohort.torch op on `tensors` (the operator's inputs at
        `shape`); dispatch=True calls torch.ops.cohort.<op>.default, through the dispatcher."""
        if self.op is None:
            raise KeyError(f"cohort.torch has no op for operator {self.operator}")
        args = tuple(tensors) + tuple(self.extra(shape))
        if dispatch:
            packet = getattr(torch.ops.cohort, self.op.name).default
            args += self.schema_tail
            return lambda: packet(*args)
        fn, kw = eager_function(self.op), dict(self.kwargs)
        return lambda: fn(*args, **kw)

    def reference(self, shape=None) -> Callable:
        """The eager torch function of the operator's inputs (the shape, where it depends on it)."""
        if not self.eager_shaped:
            return self.eager
        if shape is None:
            raise ValueError(f"the torch reference of {self.operator} needs the shape")
        return self.eager(shape)


TORCH_OPS: dict = {}     # name -> TorchOp, in registration order
BINDINGS: dict = {}      # refimpl operator name -> OpBinding

# The direct CPU and AutogradCPU kernels, one library per op (kept alive here), so that the
# native call path can take an op's two keys over and give them back (native_call.py).
_LIBS: dict = {}         # name -> torch.library.Library holding the op's Python CPU / AutogradCPU kernels
PY_KERNELS: dict = {}    # name -> (CPU kernel: impl or None, AutogradCPU kernel: f(keyset, *args) or None)


def register(op: TorchOp) -> TorchOp:
    """Define torch.ops.cohort.<op.name> as `op` says and record it; returns the record with its custom_op."""
    if op.name in TORCH_OPS:
        raise ValueError(f"torch op cohort::{op.name} is registered twice")
    custom = torch.library.custom_op(f"cohort::{op.name}", op.impl, mutates_args=())
    custom.register_fake(op.fake)
    if op.backward is not None:
        torch.library.register_autograd(f"cohort::{op.name}", op.backward, setup_context=op.setup_context)
    if op.cpu_kernel or op.autograd_cpu:
        PY_KERNELS[op.name] = (op.impl if op.cpu_kernel else None,
                               fast_autograd_kernel(op.name, custom, op.impl) if op.autograd_cpu else None)
        python_kernels(op.name)
    done = TorchOp(**{**{k: getattr(op, k) for k in op.__dataclass_fields__}, "custom_op": custom})
    TORCH_OPS[op.name] = done
    return done


# What a call through the dispatcher (torch.ops.cohort.X, and so every call a torch.compile'd
# graph makes) meets first on CPU tensors: the autograd key. custom_op's kernel there is
# Python that, with no gradient to record, enters a guard and redispatches to the CPU kernel
# (a second trip through the dispatcher and Python, ~5 us). This one, registered for
# AutogradCPU (which takes precedence over custom_op's "Autograd" alias), calls the CPU kernel
# itself when the call's dispatch keys are exactly CPU and AutogradCPU (plain CPU
# tensors: no subclass, FakeTensor, dispatch mode, functorch level or negative/conjugate
# view, any of which adds a key) and no argument needs a gradient; that is the kernel the
# redispatch would reach. Anything else goes to custom_op's own kernel, unchanged.
_PLAIN_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU).add(torch._C.DispatchKey.AutogradCPU)
_any_requires_grad = torch._C._any_requires_grad
_grad_enabled = torch.is_grad_enabled


def python_kernels(name: str):
    """(Re)register op `name`'s Python CPU and AutogradCPU kernels (PY_KERNELS)."""
    impl, autograd = PY_KERNELS[name]
    lib = _LIBS[name] = torch.library.Library("cohort", "IMPL")
    if impl is not None:
        lib.impl(name, impl, "CPU")
    if autograd is not None:
        lib.impl(name, autograd, "AutogradCPU", with_keyset=True)


def drop_python_kernels(name: str):
    """Remove op `name`'s Python CPU and AutogradCPU kernels (the native call path takes them over)."""
    _LIBS.pop(name)._destroy()


def fast_autograd_kernel(name: str, op, impl):
    """The AutogradCPU kernel described above for `op` (a custom_op, cohort::`name`)."""
    from torch._library.autograd import make_autograd_impl
    slow = make_autograd_impl(op._opoverload, op)     # custom_op's own kernel (reads its backward when called)

    def kernel(keyset, *args):
        if keyset == _PLAIN_KEYS and not (_grad_enabled() and _any_requires_grad(*args)):
            return impl(*args)
        return slow(keyset, *args)

    kernel.__name__ = f"{name}_autograd_cpu"
    return kernel


def bind(binding: OpBinding) -> OpBinding:
    """Record `binding` for its operator (which must exist in refimpl/ops)."""
    registry.get(binding.operator)                   # raises UnknownOperator naming the operators
    if binding.operator in BINDINGS:
        raise ValueError(f"operator {binding.operator} is bound twice")
    BINDINGS[binding.operator] = binding
    return binding


def bindings(tag: Optional[str] = None) -> tuple:
    """The operators' bindings in refimpl/ops OPERATORS' order; with `tag`, those whose operator carries it."""
    out = []
    for name in (*registry.OPERATORS, *registry.BACKWARD):
        b = BINDINGS.get(name)
        if b is not None and (tag is None or tag in b.tags):
            out.append(b)
    return tuple(out)


def public_ops() -> dict:
    """cohort.torch's functions: name -> the function of each op that has one (eager_function)."""
    return {name: eager_function(op) for name, op in TORCH_OPS.items() if op.function is not None}


NATIVE_ON = [False]      # the native call path's C++ kernels are registered (native_call.py)
_PLAIN = (torch.Tensor, torch.nn.Parameter)
_is_compiling = torch.compiler.is_compiling
_fronts: dict = {}       # name -> its eager function
_KINDS = {**dict.fromkeys("xvsmt", _PLAIN), "e": (float,), "b": (bool,), "f": (float, type(None)),
          "i": (int, type(None)), "n": (type(None),)}   # role -> the argument types the front passes on


def _needed(fn: Callable, impl: Callable) -> tuple:
    """(index, name) of the arguments the front must be given: those the schema (impl's signature)
    has no default for, or a default other than the function's (rope's interleaved: None, which
    the function rejects, against none)."""
    mine = inspect.signature(fn).parameters
    out = []
    for i, (name, p) in enumerate(inspect.signature(impl).parameters.items()):
        d = mine[name].default if name in mine else inspect.Parameter.empty
        if p.default is inspect.Parameter.empty or type(d) is not type(p.default) or d != p.default:
            out.append((i, name))
    return tuple(out)


def eager_function(op: TorchOp) -> Callable:
    """cohort.torch.<op>: op.function, and for an op the native call path takes (op.native) a front
    that, while the C++ kernels are registered, calls the op's dispatcher overload directly when
    the arguments are of the types the roles name (plain tensors, floats, ...; keywords by the
    schema's names):
    one C++ call, where op.function's own Python work (its checks, direct()) would cost more than
    the whole native call. The C++ kernel hands whatever it does not take to the same Python
    implementation, so results and errors are op.function's. Anything else (an unknown or
    repeated keyword, a non-tensor, tracing under torch.compile) calls op.function itself."""
    fn = op.function
    if op.native is None or fn is None:
        return fn
    front = _fronts.get(op.name)
    if front is not None:
        return front
    # OpOverload.__call__ is `return self._op(*args, **kwargs)`: its _op is the same call, one frame less
    default = op.custom_op._opoverload._op
    kinds = tuple(_KINDS[r] for r in op.native.roles)
    n = len(kinds)
    names = {a.name: i for i, a in enumerate(op.custom_op._opoverload._schema.arguments)}
    needed = _needed(fn, op.impl)

    def front(*args, **kwargs):
        if NATIVE_ON[0] and len(args) <= n and not _is_compiling():
            for a, kind in zip(args, kinds):
                if type(a) not in kind:
                    return fn(*args, **kwargs)
            for k, a in kwargs.items():       # a keyword: one of the schema's, not given twice, of its kind
                i = names.get(k)
                if i is None or i < len(args) or type(a) not in kinds[i]:
                    return fn(*args, **kwargs)
            for i, name in needed:
                if i >= len(args) and name not in kwargs:
                    return fn(*args, **kwargs)
            return default(*args, **kwargs)
        return fn(*args, **kwargs)

    functools.update_wrapper(front, fn)
    _fronts[op.name] = front
    return front
