"""From a `@triton.jit` function and a launch's argument types to a tile program.

The kernel's Python source is parsed and walked once per specialisation (the
types of its pointer and scalar arguments, the values of its constexprs).
Compile-time values (constexprs, Python numbers, dtypes, tuples, functions)
are folded as Python values, as Triton does; everything else becomes tile IR
(tir.py). Nested `@triton.jit` functions -- the kernel's own and triton's
standard library (sigmoid, cdiv, softmax, rand, ...) -- are inlined; the
language's primitives are handled by `builtins.py`. Anything else is an
UnsupportedConstruct naming the construct, the kernel and its source line.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from typing import Any

from . import tir
from .errors import KernelTypeError, UnsupportedConstruct, where
from .frontend_loops import ControlFlow, Returned
from .tir import Dt, K, Node, Ptr
from .tl_objects import unwrap
from .typing import PromotionError


class _Source:
    """A parsed function: its AST, globals and the file line of its first source line."""

    def __init__(self, fn):
        lines, start = inspect.getsourcelines(fn)
        self.tree = ast.parse(textwrap.dedent("".join(lines)))
        self.fdef = next(n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        self.offset = start - 1
        self.globals = fn.__globals__
        self.closure = inspect.getclosurevars(fn).nonlocals if fn.__closure__ else {}
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        self.name = fn.__name__


_SOURCES: dict = {}


def source_of(fn) -> _Source:
    s = _SOURCES.get(fn)
    if s is None:
        try:
            s = _SOURCES[fn] = _Source(fn)
        except (OSError, TypeError, SyntaxError, StopIteration) as e:
            raise UnsupportedConstruct(f"kernel `{getattr(fn, '__name__', fn)}`: its Python source cannot be "
                                       f"read ({type(e).__name__}: {e})") from None
    return s


class Frontend(ControlFlow):
    """Builds one tir.Program; `self.line` is the kernel source line being built."""

    def __init__(self, jitfn, params, consts):
        self.kernel = jitfn
        self.src = source_of(jitfn.fn)
        self.name = self.src.name
        self.filename = self.src.filename
        self.params, self.consts = params, consts
        self.vars: dict = {}
        self.blocks: list = [[]]
        self.counter = 0
        self.line = self.src.fdef.lineno + self.src.offset
        self.depth = 0                       # inlining depth (0: the kernel itself)
        self.stack: list = []                # (inlined function's source, kernel line of the outermost call)
        self.dynamic = 0                     # >0 inside a runtime if/for/while of an inlined function
        from . import builtins
        self.B = builtins.Builtins(self)

    # ------------------------------------------------------------ errors and emission
    def where(self) -> str:
        if not self.stack:
            return where(self.name, self.filename, self.line)
        inner = self.stack[-1][0]
        return (f"{where(self.name, self.filename, self.stack[0][1])}, in `{inner.name}` "
                f"({inner.filename}:{self.line})")

    def unsupported(self, what: str, hint: str = "") -> UnsupportedConstruct:
        return UnsupportedConstruct(f"{self.where()}: {what} is not supported by cohort.triton"
                                    + (f"; {hint}" if hint else ""))

    def type_error(self, msg: str) -> KernelTypeError:
        return KernelTypeError(f"{self.where()}: {msg}")

    def emit(self, stmt) -> None:
        if self.stack:                       # run-time errors name the kernel line of the call
            stmt = dataclasses.replace(stmt, line=self.stack[0][1])
        self.blocks[-1].append(stmt)

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}.{self.counter}"

    def let(self, value: Node, base: str = "t") -> Node:
        """Bind a node to a fresh variable and return the variable (one evaluation)."""
        if value.op in (K.VAR, K.CONST, K.PARAM):
            return value
        name = self.fresh(base)
        self.vars[name] = value.type
        self.emit(tir.Let(name, value, self.line))
        return Node(K.VAR, value.type, (), name)

    def assign(self, name: str, value: Node) -> None:
        want = self.vars.setdefault(name, value.type)
        if want != value.type:
            raise self.type_error(f"`{name.split('.')[0]}` changes type from {want!r} to {value.type!r} "
                                  "(a loop-carried or branch-merged variable keeps one type)")
        self.emit(tir.Let(name, value, self.line))

    # ------------------------------------------------------------ entry
    def build(self) -> tir.Program:
        env: dict = {}
        for name, tt in self.params:
            env[name] = Node(K.PARAM, tt, (), name)
        for name, value in self.consts:
            env[name] = value
        try:
            self.block(self.src.fdef.body, env, self.src)
        except Returned:
            pass
        except PromotionError as e:
            raise self.type_error(str(e)) from None
        except (UnsupportedConstruct, KernelTypeError):
            raise
        except Exception as e:             # a case the frontend does not handle: say where, never a traceback
            raise self.unsupported(f"this construct (cohort.triton failed on it: {type(e).__name__}: {e})") \
                from None
        prog = tir.Program(self.name, self.filename, tuple(self.params), tuple(self.consts),
                           tuple(self.blocks[0]), dict(self.vars))
        try:
            tir.verify(prog)
        except tir.VerifyError as e:
            raise KernelTypeError(f"kernel `{self.name}`: IR verification failed: {e}") from None
        return prog

    # ------------------------------------------------------------ statements
    def block(self, stmts, env: dict, src: _Source) -> None:
        for st in stmts:
            self.line = st.lineno + src.offset
            self.stmt(st, env, src)

    def stmt(self, st, env, src):
        m = getattr(self, "s_" + type(st).__name__, None)
        if m is None:
            raise self.unsupported(f"the statement `{type(st).__name__}`")
        m(st, env, src)

    def s_Pass(self, st, env, src):
        pass

    def s_Expr(self, st, env, src):
        if isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            return                           # docstring
        self.expr(st.value, env, src)

    def s_Assign(self, st, env, src):
        value = self.expr(st.value, env, src)
        for t in st.targets:
            self.bind(t, value, env, src)

    def s_AnnAssign(self, st, env, src):
        if st.value is None:
            return
        self.bind(st.target, self.expr(st.value, env, src), env, src)

    def s_AugAssign(self, st, env, src):
        if not isinstance(st.target, ast.Name):
            raise self.unsupported("augmented assignment to anything but a name")
        cur = self.load_name(st.target.id, env, src)
        self.bind(st.target, self.B.binop(type(st.op).__name__, cur, self.expr(st.value, env, src)), env, src)

    def bind(self, target, value, env, src):
        if isinstance(target, ast.Name):
            if isinstance(value, Node) and value.op not in (K.VAR, K.PARAM, K.CONST):
                value = self.let(value, target.id)
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            vals = unwrap(value) if not isinstance(value, Node) else None
            if not isinstance(vals, (tuple, list)) or len(vals) != len(target.elts):
                raise self.type_error("cannot unpack this value into "
                                      f"{len(target.elts)} names")
            for t, v in zip(target.elts, vals):
                self.bind(t, v, env, src)
        else:
            raise self.unsupported(f"assignment to `{ast.unparse(target)}`",
                                   "tiles are immutable: use tl.where or a store")

    def s_Return(self, st, env, src):
        value = None if st.value is None else self.expr(st.value, env, src)
        if self.depth == 0:
            if value is not None:
                raise self.type_error("a kernel cannot return a value")
            self.emit(tir.Return(self.line))
            raise Returned(None)
        if self.dynamic:
            raise self.unsupported("`return` inside a runtime if/for/while of an inlined function")
        raise Returned(value)

    def s_Assert(self, st, env, src):
        cond = self.expr(st.test, env, src)
        msg = "" if st.msg is None else str(unwrap(self.expr(st.msg, env, src)))
        self.B.device_assert(cond, msg)

    def s_If(self, st, env, src):
        cond = unwrap(self.expr(st.test, env, src))
        if not isinstance(cond, Node):
            self.block(st.body if cond else st.orelse, env, src)
            return
        if cond.shape != ():
            raise self.type_error(f"an `if` condition must be a scalar, not a tile of shape {list(cond.shape)}")
        cond = self.let(self.B.to_bool(cond), "cond")
        outs, envs = [], []
        line = self.line
        for body in (st.body, st.orelse):
            e = dict(env)
            self.blocks.append([])
            self.dynamic += self.depth > 0
            returned = False
            try:
                self.block(body, e, src)
            except Returned:
                returned = True
            self.dynamic -= self.depth > 0
            outs.append((self.blocks.pop(), returned))
            envs.append(e)
        self.line = line
        merged = self.merge(env, envs, [r for _, r in outs], outs)
        self.emit(tir.If(cond, tuple(outs[0][0]), tuple(outs[1][0]), line))
        env.update(merged)
        if outs[0][1] and outs[1][1]:
            raise Returned(None)

    def s_Break(self, st, env, src):
        raise self.unsupported("`break`", "Triton has no break either: use a while loop with a flag")

    def s_Continue(self, st, env, src):
        raise self.unsupported("`continue`")

    # ------------------------------------------------------------ expressions
    def load_name(self, name, env, src):
        if name in env:
            return env[name]
        if name in src.closure:
            return unwrap(src.closure[name])
        if name in src.globals:
            v = src.globals[name]
            return unwrap(v)
        import builtins as py
        if hasattr(py, name):
            return getattr(py, name)
        raise self.type_error(f"name `{name}` is not defined")

    def expr(self, e, env, src) -> Any:
        m = getattr(self, "e_" + type(e).__name__, None)
        if m is None:
            raise self.unsupported(f"the expression `{ast.unparse(e)}`")
        return m(e, env, src)

    def e_Constant(self, e, env, src):
        return e.value

    def e_Name(self, e, env, src):
        return self.load_name(e.id, env, src)

    def e_Tuple(self, e, env, src):
        return tuple(self.expr(x, env, src) for x in e.elts)

    e_List = e_Tuple

    def e_Attribute(self, e, env, src):
        base = self.expr(e.value, env, src)
        if isinstance(base, Node):
            return self.B.tile_attr(base, e.attr)
        try:
            return unwrap(getattr(base, e.attr))
        except AttributeError:
            raise self.type_error(f"`{ast.unparse(e)}` does not exist") from None

    def e_Call(self, e, env, src):
        if isinstance(e.func, ast.Attribute):
            base = self.expr(e.func.value, env, src)
            if isinstance(base, Node):
                args = [self.expr(a, env, src) for a in e.args]
                kwargs = {k.arg: self.expr(k.value, env, src) for k in e.keywords}
                return self.B.method(base, e.func.attr, args, kwargs)
            try:
                fn = getattr(base, e.func.attr)
            except AttributeError:
                raise self.type_error(f"`{ast.unparse(e.func)}` does not exist") from None
        else:
            fn = self.expr(e.func, env, src)
        if any(isinstance(a, ast.Starred) for a in e.args) or any(k.arg is None for k in e.keywords):
            raise self.unsupported("*args / **kwargs in a call")
        args = [self.expr(a, env, src) for a in e.args]
        kwargs = {k.arg: self.expr(k.value, env, src) for k in e.keywords}
        return self.call(fn, args, kwargs)

    def call(self, fn, args, kwargs):
        from triton.runtime.jit import JITFunction
        h = self.B.lookup(fn)
        if h is not None:
            return h(*args, **kwargs)
        if isinstance(fn, JITFunction):
            return self.inline(fn, args, kwargs)
        from triton.runtime.jit import ConstexprFunction
        if isinstance(fn, ConstexprFunction):
            return unwrap(fn.fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()}))
        from .memory_builtins import TensorDesc
        if isinstance(getattr(fn, "__self__", None), TensorDesc):
            return fn(*args, **kwargs)
        if fn in _PY_FUNCS:
            return self.B.python_builtin(fn, args, kwargs)
        import triton.language as tl
        if isinstance(fn, type) and issubclass(fn, tl.constexpr) or fn is tl.constexpr:
            return unwrap(args[0]) if args else None
        if isinstance(fn, tl.dtype):
            raise self.unsupported(f"calling the dtype {fn} as a function", "use x.to(dtype)")
        from triton.language.core import is_builtin
        if callable(fn) and not is_builtin(fn) and not any(isinstance(a, Node) for a in args) \
                and not any(isinstance(v, Node) for v in kwargs.values()):
            try:                             # a compile-time helper (a dtype's method, ...)
                return unwrap(fn(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in kwargs.items()}))
            except Exception as ex:
                raise self.type_error(f"compile-time call of `{getattr(fn, '__qualname__', fn)}` failed: {ex}") \
                    from None
        name = getattr(fn, "__qualname__", None) or repr(fn)
        mod = getattr(fn, "__module__", "") or ""
        raise self.unsupported(f"`{mod + '.' if mod else ''}{name}`")

    def inline(self, fn, args, kwargs):
        src = source_of(fn.fn)
        sig = inspect.signature(fn.fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise self.type_error(f"call of `{src.name}`: {e}") from None
        bound.apply_defaults()
        env = {k: (unwrap(v) if not isinstance(v, Node) else v) for k, v in bound.arguments.items()}
        if self.depth > 40:
            raise self.unsupported("recursion in @triton.jit functions")
        line, self.depth = self.line, self.depth + 1
        self.stack.append((src, self.stack[0][1] if self.stack else line))
        saved_dyn, self.dynamic = self.dynamic, 0
        try:
            self.block(src.fdef.body, env, src)
            result = None
        except Returned as r:
            result = r.value
        finally:
            self.depth, self.line, self.dynamic = self.depth - 1, line, saved_dyn
            self.stack.pop()
        return result

    def e_BinOp(self, e, env, src):
        a, b = self.expr(e.left, env, src), self.expr(e.right, env, src)
        return self.B.binop(type(e.op).__name__, a, b)

    def e_UnaryOp(self, e, env, src):
        return self.B.unop(type(e.op).__name__, self.expr(e.operand, env, src))

    def e_Compare(self, e, env, src):
        if len(e.ops) != 1:
            raise self.unsupported("chained comparisons", "write `a < b and b < c`")
        op = type(e.ops[0]).__name__
        a, b = self.expr(e.left, env, src), self.expr(e.comparators[0], env, src)
        return self.B.compare(op, a, b)

    def e_BoolOp(self, e, env, src):
        is_and = isinstance(e.op, ast.And)
        vals = []
        for x in e.values:
            v = unwrap(self.expr(x, env, src))
            if not isinstance(v, Node) and not vals:
                if is_and and not v:
                    return v
                if not is_and and v:
                    return v
                continue
            vals.append(v)
        if not vals:
            return unwrap(self.expr(e.values[-1], env, src))
        acc = vals[0]
        for v in vals[1:]:
            acc = self.B.logical(is_and, acc, v)
        return acc if isinstance(acc, Node) and acc.elem is Dt.I1 else self.B.to_bool(self.B.tile(acc))

    def e_IfExp(self, e, env, src):
        c = unwrap(self.expr(e.test, env, src))
        if isinstance(c, Node):
            return self.B.where(c, self.expr(e.body, env, src), self.expr(e.orelse, env, src))
        return self.expr(e.body if c else e.orelse, env, src)

    def e_Subscript(self, e, env, src):
        base = self.expr(e.value, env, src)
        idx = e.slice
        items = idx.elts if isinstance(idx, ast.Tuple) else [idx]
        if isinstance(base, Node):
            spec = []
            for it in items:
                if isinstance(it, ast.Slice):
                    if it.lower or it.upper or it.step:
                        raise self.unsupported("slicing a tile with bounds", "only `:` and `None` index a tile")
                    spec.append(":")
                else:
                    v = unwrap(self.expr(it, env, src))
                    if v is None:
                        spec.append(None)
                    else:
                        raise self.unsupported("indexing a tile by a value", "only `:` and `None` index a tile")
            return self.B.index(base, spec)
        base = unwrap(base)
        key = unwrap(self.expr(idx, env, src))
        if isinstance(key, Node):
            raise self.unsupported("indexing a compile-time tuple by a runtime value")
        try:
            return unwrap(base[key])
        except Exception as ex:
            raise self.type_error(f"`{ast.unparse(e)}`: {ex}") from None

    def e_Slice(self, e, env, src):
        """A slice of a compile-time tuple or list (`x.shape[:-1]`, as Triton's standard library
        writes); its bounds must be compile-time values (a tile is indexed by `:` and `None` only,
        e_Subscript)."""
        parts = []
        for part in (e.lower, e.upper, e.step):
            v = None if part is None else unwrap(self.expr(part, env, src))
            if isinstance(v, Node):
                raise self.unsupported("a slice with a runtime bound")
            parts.append(v)
        return slice(*parts)

    def e_JoinedStr(self, e, env, src):
        parts = []
        for v in e.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                x = unwrap(self.expr(v.value, env, src))
                if isinstance(x, Node):
                    raise self.unsupported("a tile in an f-string")
                parts.append(format(x, ast.unparse(v.format_spec)[2:-1] if v.format_spec else ""))
        return "".join(parts)

    def e_Lambda(self, e, env, src):
        raise self.unsupported("lambda", "write the combine function as a @triton.jit function")


_PY_FUNCS = {min, max, len, int, float, bool, abs, print, isinstance, getattr, tuple, list, range}


__all__ = ["Frontend", "unwrap", "source_of", "Ptr"]
