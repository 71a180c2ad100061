"""Inductor's generated code, read and called natively: the output-code analysis (which
generated kernels a graph runs, and whether it does anything else) and the JIT trampoline
that calls them with raw pointers, timed like our own entries (DESIGN §6)."""
from __future__ import annotations

import ast
import ctypes
import itertools
import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..backend import jit

# ---------------------------------------------------------------- output-code analysis

_ALLOWED_CALLS = {"assert_size_stride", "assert_alignment", "empty_strided_cpu", "reinterpret_tensor",
                  "alloc_from_pool", "args.clear", "len", "range"}
ARGTYPE = {"int64_t": "i64", "long": "i64", "float": "float", "double": "double"}


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return _dotted(node.value) + "." + node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    if isinstance(node, ast.Subscript):
        return _dotted(node.value) + "[]"
    return type(node).__name__


@dataclass
class GraphFacts:
    """What the output-code module's `call()` does, read from its source."""
    kernels: dict                 # name -> list of C argument types
    sequence: list                # kernel names in call order (static)
    foreign: list                 # calls that are neither allocation/view nor a generated kernel
    omp_threads: int              # thread count baked into the kernels (1: no OpenMP region)
    vector_lanes: list            # Vectorized widths seen (16 on AVX-512, 8 on AVX2)
    control_flow: bool            # loops/branches in call(): the static sequence may not be the run's


def analyse_output_code(source: str) -> GraphFacts:
    """Parse an Inductor CPU output-code module (the file PyCodeCache loaded)."""
    tree = ast.parse(source)
    kernels = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and _dotted(node.value.func).endswith(".cpp_pybinding")):
            argtypes = ast.literal_eval(node.value.args[0])
            kernels[node.targets[0].id] = list(argtypes)
    call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            call = node
            break
    if call is None:
        raise ValueError("output code has no call() function")
    sequence, foreign, control = [], [], False
    for node in ast.walk(call):
        if isinstance(node, (ast.For, ast.While, ast.If, ast.IfExp, ast.Try, ast.With)):
            control = True
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in kernels:
                sequence.append((node.lineno, node.col_offset, name))
            elif name not in _ALLOWED_CALLS:
                foreign.append(name)
    sequence = [n for _, _, n in sorted(sequence)]
    threads = [int(t) for t in re.findall(r"#pragma\s+omp\s+parallel[^\n]*num_threads\((\d+)\)", source)]
    if re.search(r"#pragma\s+omp\s+parallel(?![^\n]*num_threads)", source):
        threads.append(-1)     # an OpenMP region without a baked count: runtime-dependent
    lanes = sorted({int(n) for n in re.findall(r"Vectorized<float>::loadu\([^;]*?static_cast<int64_t>\((\d+)\)\)",
                                                 source)} |
                   {int(n) for n in re.findall(r"x\d+\+=static_cast<int64_t>\((\d+)L?\)", source) if int(n) > 1})
    return GraphFacts(kernels, sequence, sorted(set(foreign)), max(threads) if threads else 1, lanes, control)


# ---------------------------------------------------------------- the native entry

entry_ids = itertools.count()
record_lock = threading.Lock()
_empty = {}


def empty_function_address() -> int:
    """A JIT function that returns at once (called with any arity: the SysV ABI allows it)."""
    if not _empty:
        linked = jit.compile_module("define void @cohort_inductor_empty() {\n  ret void\n}\n",
                                    ["cohort_inductor_empty"])
        _empty["keep"] = linked
        _empty["addr"] = linked.addresses["cohort_inductor_empty"]
    return _empty["addr"]


_LLTYPE = {"ptr": "ptr", "i64": "i64", "float": "float", "double": "double"}


def trampoline_ir(name: str, calls: list) -> str:
    """`void name(ptr args)`: for each (address, [types]) call address(args[k], ...), slots in order."""
    lines = [f"define void @{name}(ptr %args) {{", "entry:"]
    slot = 0
    for c, (addr, types_) in enumerate(calls):
        vals = []
        for j, t in enumerate(types_):
            lt = _LLTYPE[t]
            lines.append(f"  %p{c}_{j} = getelementptr i64, ptr %args, i64 {slot}")
            lines.append(f"  %a{c}_{j} = load {lt}, ptr %p{c}_{j}, align 8")
            vals.append(f"{lt} %a{c}_{j}")
            slot += 1
        lines.append(f"  %f{c} = inttoptr i64 {addr} to ptr")
        lines.append(f"  call void %f{c}({', '.join(vals)})")
    lines += ["  ret void", "}", ""]
    return "\n".join(lines)


@dataclass
class NativeEntry:
    """What the native timer needs: `time_entry(fn_address, arg_address, iters, samples)`.

    `overhead_address` is the same trampoline calling an empty function in
    place of every kernel (same arities, same argument loads; for AOTInductor:
    the tensor-handle juggling without the model run), to subtract the
    harness's and trampoline's own per-call cost where wanted.
    """
    fn_address: int
    arg_address: int
    overhead_address: int
    kind: str                     # "inductor-kernels" | "aoti"
    whole_graph: bool
    kernels: list                 # names, in call order
    note: str = ""
    _keep: list = field(default_factory=list, repr=False)
    _status: Optional[Callable] = field(default=None, repr=False)

    def run(self) -> None:
        """One call of the entry from Python (ctypes)."""
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(self.fn_address)(self.arg_address)

    def errors(self) -> int:
        """Failed calls counted by the entry so far (AOTInductor run error codes; 0 for kernels)."""
        return int(self._status()) if self._status else 0

    def time_ns(self, iters: int, samples: int) -> np.ndarray:
        from ..backend import timer
        return timer.time_entry(self.fn_address, self.arg_address, iters, samples)

    def overhead_ns(self, iters: int, samples: int) -> np.ndarray:
        from ..backend import timer
        return timer.time_entry(self.overhead_address, self.arg_address, iters, samples)


def capsule_pointer(capsule) -> int:
    """The pointer in a nameless PyCapsule (torch._C._aoti hands AtenTensorHandles out so)."""
    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(api.PyCapsule_GetPointer(capsule, None))


def capsule(pointer: int):
    api = ctypes.pythonapi
    api.PyCapsule_New.restype = ctypes.py_object
    api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return api.PyCapsule_New(pointer, None, None)

