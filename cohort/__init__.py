"""cohort: GPU-style compute kernels in plain Python, run on the CPU.

Kernels are defined by an exact NumPy interpreter (`cohort.refimpl`) and
compiled by llvmlite into scalar and SIMD variants (`cohort.backend`).
"""
from .refimpl.errors import KernelError
from .refimpl.frontend import KernelFunction, kernel
from .refimpl.interpreter import KernelRuntimeError, interpret
from .refimpl.lang import (
                           INF,
                           NAN,
                           Buffer,
                           Const,
                           atomic_add,
                           atomic_and,
                           atomic_max,
                           atomic_min,
                           atomic_or,
                           atomic_sub,
                           atomic_xor,
                           barrier,
                           bf16,
                           bitcast,
                           block_id,
                           block_max,
                           block_min,
                           block_size,
                           block_sum,
                           cos,
                           erf,
                           exp,
                           f16,
                           f32,
                           fma,
                           global_id,
                           i32,
                           log,
                           num_threads,
                           private,
                           shared,
                           sigmoid,
                           sin,
                           sqrt,
                           tanh,
                           thread_id,
                           u32,
)
from .refimpl.launch_check import FRAMEWORK_BUFFERS as _FRAMEWORK_BUFFERS

# torch tensors as kernel buffers: checked and viewed by the torch layer (imported on first use)
_FRAMEWORK_BUFFERS["torch"] = "cohort.torch.buffers"

__version__ = "0.1.0"

__all__ = ["KernelFunction", "kernel", "KernelRuntimeError", "interpret", "KernelError",
           "INF", "NAN", "Buffer", "Const", "atomic_add", "atomic_and", "atomic_max", "atomic_min",
           "atomic_or", "atomic_sub", "atomic_xor", "barrier", "bf16", "bitcast", "block_id", "block_max", "block_min", "block_size",
           "block_sum", "cos", "erf", "exp", "f16", "f32", "fma", "global_id", "i32", "log", "num_threads", "private",
           "shared", "sigmoid", "sin", "sqrt", "tanh", "thread_id", "u32"]
