"""`kernel[grid](*args, **meta)` on cohort: bind, specialise, build once per key, run."""
from __future__ import annotations

import inspect

import numpy as np

from .errors import LaunchError, TritonError
from .frontend import Frontend, unwrap
from .interp import Buffer, Interpreter
from .tir import TT, Dt, Ptr
from .typing import PromotionError, arg_type

# Triton's compile options: accepted at a launch and ignored by the reference
LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                  "launch_pdl", "debug", "sanitize_overflow", "extern_libs", "arch", "default_dot_input_precision",
                  "allowed_dot_input_precisions", "max_num_imprecise_acc_default", "instrumentation_mode",
                  "matrix_instr_nonkdim", "waves_per_eu", "kpack", "cluster_dims", "ir_override",
                  "fpsan_homomorphic_casts", "num_buffers_warp_spec", "num_consumer_groups", "reg_dec_producer",
                  "reg_inc_consumer", "loop_unroll_factor"}

_TORCH_DT = {"torch.float32": Dt.F32, "torch.float16": Dt.F16, "torch.bfloat16": Dt.BF16, "torch.float64": Dt.F64,
             "torch.int8": Dt.I8, "torch.int16": Dt.I16, "torch.int32": Dt.I32, "torch.int64": Dt.I64,
             "torch.uint8": Dt.U8, "torch.uint16": Dt.U16, "torch.uint32": Dt.U32, "torch.uint64": Dt.U64,
             "torch.bool": Dt.I1}

_BUILDS: dict = {}       # (kernel, key) -> tir.Program


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr") and hasattr(x, "untyped_storage")


def _buffer(name, t, kernel):
    import torch
    if t.device.type != "cpu":
        raise LaunchError(f"kernel `{kernel}`: argument `{name}` is on {t.device}; cohort.triton runs CPU tensors")
    dt = _TORCH_DT.get(str(t.dtype))
    if dt is None:
        raise LaunchError(f"kernel `{kernel}`: argument `{name}` has dtype {t.dtype}, which cohort.triton "
                          "does not support")
    t = t.detach()
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,), (1,))
    if dt is Dt.BF16:
        arr = flat.view(torch.int16).numpy().view(np.uint16)
    else:
        arr = flat.numpy()
    return dt, Buffer(arr, t.storage_offset(), dt)


def bind(jitfn, args, kwargs):
    """Arguments by name (defaults applied), launch options removed."""
    kwargs = dict(kwargs)
    names = [p.name for p in jitfn.params]
    for k in list(kwargs):
        if k not in names:
            if k in LAUNCH_OPTIONS:
                kwargs.pop(k)
            else:
                raise LaunchError(f"kernel `{jitfn.fn.__name__}`: keyword argument `{k}` is neither a parameter "
                                  "nor a launch option")
    try:
        bound = inspect.signature(jitfn.fn).bind(*args, **kwargs)
    except TypeError as e:
        raise LaunchError(f"kernel `{jitfn.fn.__name__}`: {e}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def specialise(jitfn, bound):
    """(params, consts, buffers, scalars) as Triton specialises: constexprs and None are
    compile-time; an int 1 is a constant unless do_not_specialize names it."""
    name = jitfn.fn.__name__
    params, consts, buffers, scalars = [], [], {}, {}
    for p in jitfn.params:
        v = bound[p.name]
        if p.is_constexpr:
            consts.append((p.name, unwrap(v)))
        elif v is None:
            consts.append((p.name, None))
        elif _is_tensor(v):
            dt, buf = _buffer(p.name, v, name)
            params.append((p.name, TT(Ptr(dt))))
            buffers[p.name] = buf
        elif isinstance(v, (bool, int, float)) and not isinstance(v, np.generic):
            annotated = ANNOTATED.get(getattr(p, "annotation_type", ""))
            if annotated is not None:             # `n: tl.int64`: the argument has that type
                params.append((p.name, TT(annotated)))
                scalars[p.name] = _scalar_of(v, annotated, name, p.name)
                continue
            if isinstance(v, int) and not isinstance(v, bool) and v == 1 and not p.do_not_specialize:
                consts.append((p.name, 1))
                continue
            try:
                dt = arg_type(v)
            except PromotionError as e:
                raise LaunchError(f"kernel `{name}`: argument `{p.name}`: {e}") from None
            params.append((p.name, TT(dt)))
            scalars[p.name] = np.asarray(v).astype(np.float64).astype(np.float32) if dt is Dt.F32 \
                else np.asarray(v).astype(dt.np) if dt is not Dt.U64 else np.uint64(v)
        else:
            raise LaunchError(f"kernel `{name}`: argument `{p.name}` of type {type(v).__name__} is not supported "
                              "(CPU torch tensors, ints, floats, bools and constexprs are)")
    return params, consts, buffers, scalars


ANNOTATED = {"i8": Dt.I8, "i16": Dt.I16, "i32": Dt.I32, "i64": Dt.I64, "u1": Dt.I1, "u8": Dt.U8,
              "u16": Dt.U16, "u32": Dt.U32, "u64": Dt.U64, "fp16": Dt.F16, "bf16": Dt.BF16, "fp32": Dt.F32,
              "fp64": Dt.F64}


def _scalar_of(v, dt: Dt, kernel, pname):
    from .tir import int_range
    from .values import cast
    if dt.is_int and dt is not Dt.I1:
        lo, hi = int_range(dt)
        if not isinstance(v, int) or not lo <= v <= hi:
            raise LaunchError(f"kernel `{kernel}`: argument `{pname}` = {v!r} does not fit its annotation {dt!r}")
        return np.asarray(v).astype(dt.np)
    if dt is Dt.I1:
        return np.bool_(v)
    return cast(np.float64(v), Dt.F64, dt)


def build(jitfn, params, consts):
    key = (jitfn, tuple(params), tuple((k, _hashable(v)) for k, v in consts))   # holds jitfn: no id reuse
    prog = _BUILDS.get(key)
    if prog is None:
        prog = _BUILDS[key] = Frontend(jitfn, params, consts).build()
    return prog


def _hashable(v):
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def grid_of(grid, bound, name):
    g = grid(bound) if callable(grid) else grid
    g = unwrap(g)
    if isinstance(g, int):
        g = (g,)
    try:
        g = tuple(int(unwrap(x)) for x in g)
    except (TypeError, ValueError):
        raise LaunchError(f"kernel `{name}`: the grid {g!r} is not a tuple of ints") from None
    if not 1 <= len(g) <= 3 or any(x < 0 for x in g):
        raise LaunchError(f"kernel `{name}`: the grid {g!r} must have 1 to 3 non-negative sizes")
    return g + (1,) * (3 - len(g))


def run_reference(jitfn, grid, args, kwargs, warmup=False):
    return run_mode("reference", jitfn, grid, args, kwargs, warmup)


def run_mode(mode, jitfn, grid, args, kwargs, warmup=False):
    """One launch in `mode`: "reference" (interp.py), "native" or "check" (native.py)."""
    bound = bind(jitfn, args, kwargs)
    params, consts, buffers, scalars = specialise(jitfn, bound)
    prog = build(jitfn, params, consts)
    if mode != "reference":
        from . import native
        native.compile_program(prog)            # a construct native mode does not lower: said before running
    if warmup:
        return prog
    g = grid_of(grid, bound, jitfn.fn.__name__)
    if 0 in g:
        return prog
    if mode == "reference":
        Interpreter(prog, buffers, scalars, g).run()
    elif mode == "native":
        native.run(prog, buffers, scalars, g)
    else:
        native.run_check(prog, buffers, scalars, g)
    return prog


__all__ = ["run_reference", "run_mode", "bind", "specialise", "build", "TritonError"]
