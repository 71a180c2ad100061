"""The native-entry timer (DESIGN §6).

A JIT-compiled loop calls `void f(void *arg)` through its function pointer
`iters` times between two `clock_gettime(CLOCK_MONOTONIC)` reads (the id is the
target's: 1 on Linux, 6 on macOS), `samples`
times over. The timed region holds no Python, no runtime, no allocation. Any
C function with that signature can be timed: our entries, the runtime's
launch entry (`cohort_runtime_launch` with a runtime record: the runtime-E2E
boundary, runtime.NativeLaunch.time), or a trampoline that calls another
system's kernels (TorchInductor's) with raw pointers.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import jit, target

_IR = r"""
%timespec = type { i64, i64 }
declare i32 @clock_gettime(i32, ptr)

define internal i64 @now_ns() {
  %ts = alloca %timespec
  call i32 @clock_gettime(i32 CLOCK_ID, ptr %ts)
  %sp = getelementptr %timespec, ptr %ts, i32 0, i32 0
  %np = getelementptr %timespec, ptr %ts, i32 0, i32 1
  %s = load i64, ptr %sp
  %n = load i64, ptr %np
  %s9 = mul i64 %s, 1000000000
  %t = add i64 %s9, %n
  ret i64 %t
}

define void @cohort_time_samples(ptr %fn, ptr %arg, i64 %iters, i64 %samples, ptr %out) {
entry:
  br label %outer
outer:
  %s = phi i64 [0, %entry], [%s1, %done]
  %more = icmp slt i64 %s, %samples
  br i1 %more, label %start, label %exit
start:
  %t0 = call i64 @now_ns()
  br label %inner
inner:
  %i = phi i64 [0, %start], [%i1, %inner]
  call void %fn(ptr %arg)
  %i1 = add i64 %i, 1
  %again = icmp slt i64 %i1, %iters
  br i1 %again, label %inner, label %done
done:
  %t1 = call i64 @now_ns()
  %dt = sub i64 %t1, %t0
  %dtf = sitofp i64 %dt to double
  %itf = sitofp i64 %iters to double
  %per = fdiv double %dtf, %itf
  %slot = getelementptr double, ptr %out, i64 %s
  store double %per, ptr %slot
  %s1 = add i64 %s, 1
  br label %outer
exit:
  ret void
}

define void @cohort_empty_entry(ptr %arg) {
  ret void
}
"""



def ir(tgt) -> str:
    """The timer module for target `tgt` (target.Target): its monotonic clock's id."""
    return _IR.replace("CLOCK_ID", str(tgt.clock_monotonic))


_lib = {}
_lock = threading.Lock()


def _timer():
    with _lock:
        if not _lib:
            linked = jit.compile_module(ir(target.host()), ["cohort_time_samples", "cohort_empty_entry"])
            _lib["keep"] = linked
            _lib["fn"] = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                          ctypes.c_int64, ctypes.c_void_p)(
                linked.addresses["cohort_time_samples"])
            _lib["empty"] = linked.addresses["cohort_empty_entry"]
        return _lib


def time_entry(fn_address: int, arg_address: int, iters: int, samples: int) -> np.ndarray:
    """Nanoseconds per call of `fn(arg)`, one figure per sample (each averaging `iters` calls)."""
    if iters < 1 or samples < 1:
        raise ValueError("iters and samples must be at least 1")
    lib = _timer()
    out = np.zeros(samples, np.float64)
    lib["fn"](fn_address, arg_address, iters, samples, out.ctypes.data)
    return out


def empty_entry_address() -> int:
    """An entry that does nothing: times the timer's own per-call cost."""
    return _timer()["empty"]


def calibrate_iters(fn_address: int, arg_address: int, target_ns: float = 2e5, cap: int = 1 << 20) -> int:
    """Calls per sample so that one sample lasts about `target_ns` (>= 1)."""
    once = float(np.median(time_entry(fn_address, arg_address, 1, 3)))
    return int(max(1, min(cap, target_ns // max(once, 1.0))))
