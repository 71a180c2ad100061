"""Python frontend: a `@kernel` function's AST becomes IR.

One `emit_<Node>` method per supported Python node; anything else is
rejected with the source line. Python number literals are weakly typed (they
take the type of the other operand); everything else is strictly typed: no
implicit conversion between f32, i32, u32 and bool.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types
from typing import Optional

from . import ir
from .errors import KernelError, source_lines
from .ir import (
    Assign,
    Atomic,
    Barrier,
    Collective,
    DType,
    Expr,
    For,
    If,
    IRTypeError,
    Kernel,
    Loc,
    Op,
    Param,
    ParamKind,
    Private,
    PStore,
    Shared,
    SStore,
    Store,
)
from .lang import BufferType, Builtin, ConstType, ScalarType, StorageType
from .opdefs import GROUPS, RECORDS
from .spec import validate

# Python's operator symbols; which operation each one is comes from the registry's
# spellings, the same ones the printer writes
_PY_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
               ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>",
               ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_INFIX = {sp.text: d.op for d in RECORDS for sp in (d.spelling, d.int_spelling)
          if sp is not None and sp.form == "infix"}
_BINOPS = {node: _INFIX[sym] for node, sym in _PY_SYMBOLS.items() if _INFIX[sym] not in GROUPS["compare"]}
_CMPOPS = {node: _INFIX[sym] for node, sym in _PY_SYMBOLS.items() if _INFIX[sym] in GROUPS["compare"]}
# Python's own built-ins that are kernel operations: min, max, abs, len
_PY_CALLS = {getattr(builtins, d.spelling.text): d for d in RECORDS
             if d.spelling.form == "call" and hasattr(builtins, d.spelling.text)}


class FrontendError(KernelError):
    pass


class _Emitter:
    def __init__(self, fn, block: int):
        if not inspect.isfunction(fn):
            raise FrontendError(getattr(fn, "__name__", repr(fn)), None, "@kernel must decorate a plain function")
        self.fn = fn
        self.block = block
        src_lines, self.first_line = source_lines(fn)
        self.lines = textwrap.dedent("".join(src_lines)).splitlines()
        tree = ast.parse(textwrap.dedent("".join(src_lines)))
        self.fdef = tree.body[0]
        self.name = fn.__name__
        self.scope = dict(builtins.__dict__)
        self.scope.update(fn.__globals__)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                self.scope[name] = cell.cell_contents
            except ValueError:  # a closure variable not assigned yet: the name is undefined
                pass
        self.params: dict = {}
        self.vars: dict = {}        # variable -> dtype
        self.privates: dict = {}    # private array -> dtype
        self.shared: dict = {}      # shared array -> dtype
        self.dead_loop_vars: set = set()
        self.local_names: set = set()  # every name the kernel assigns (Python: local throughout)
        self.node: Optional[ast.AST] = None
        self.depth = 0

    # ------------------------------------------------------------ errors
    def loc(self, node=None) -> Loc:
        node = node or self.node
        if node is None or not hasattr(node, "lineno"):
            return Loc()
        text = self.lines[node.lineno - 1].strip() if node.lineno <= len(self.lines) else ""
        return Loc(self.first_line + node.lineno - 1, text)

    def err(self, msg: str, node=None):
        raise FrontendError(self.name, self.loc(node), msg)

    # ------------------------------------------------------------ kernel
    def kernel(self) -> Kernel:
        f = self.fdef
        if not isinstance(f, ast.FunctionDef):
            self.err("@kernel must decorate a plain function", f)
        a = f.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            self.err("kernel parameters must be plain positional parameters without defaults", f)
        params = []
        for arg in a.args:
            self.node = arg
            if arg.annotation is None:
                self.err(f"parameter {arg.arg} needs a type: Buffer[f32], Const[int], f32, i32 or u32")
            t = self.resolve(arg.annotation)
            if isinstance(t, BufferType):
                p = Param(arg.arg, ParamKind.BUFFER, t.dtype)
            elif isinstance(t, ConstType):
                p = Param(arg.arg, ParamKind.CONST, DType.I32)
            elif isinstance(t, ScalarType):
                p = Param(arg.arg, ParamKind.SCALAR, t.dtype)
            else:  # bf16/f16 are buffer element types only
                self.err(f"parameter {arg.arg}: {'use Buffer[' + t.name + ']' if isinstance(t, StorageType) else 'unsupported type annotation'}")
            params.append(p)
            self.params[p.name] = p
        self.local_names = {n.id for n in ast.walk(f) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        body = self.stmts(f.body)
        k = Kernel(self.name, tuple(params), body, self.block)
        validate(k)
        return k

    def resolve(self, node):
        """The Python object a Name/Attribute chain denotes in the kernel's scope."""
        if isinstance(node, ast.Name):
            if node.id not in self.scope:
                self.err(f"name {node.id} is not defined", node)
            return self.scope[node.id]
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if not hasattr(base, node.attr):
                self.err(f"{ast.unparse(node)} is not defined", node)
            return getattr(base, node.attr)
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value)
            try:
                return base[self.resolve(node.slice)]
            except TypeError as e:
                self.err(str(e), node)
        self.err(f"unsupported annotation {ast.unparse(node)}", node)

    # ------------------------------------------------------------ statements
    def stmts(self, nodes) -> tuple:
        out = []
        for n in nodes:
            self.node = n
            method = getattr(self, f"emit_{type(n).__name__}", None)
            if method is None:
                self.err(f"unsupported statement: {type(n).__name__.lower()}", n)
            try:
                r = method(n)
            except IRTypeError as e:
                self.err(str(e), n)
            if r is not None:
                out.append(r)
        return tuple(out)

    def emit_Pass(self, n):
        return None

    def emit_Expr(self, n):
        if isinstance(n.value, ast.Constant) and isinstance(n.value.value, str):
            return None  # docstring
        call = self.builtin_call(n.value)
        if call is not None and call.kind == "barrier" and not self.call_args(n.value, 0):
            return Barrier(self.loc())
        if call is not None and call.kind == "atomic":
            return self.atomic(call, n.value)
        if isinstance(n.value, ast.Call):
            self.expr(n.value)  # names an unsupported call: print(), np.exp(), block_sum() ...
        self.err("an expression statement has no effect")

    def emit_Assign(self, n):
        if len(n.targets) != 1 or isinstance(n.targets[0], (ast.Tuple, ast.List)):
            self.err("assign one target at a time")
        return self.assign(n.targets[0], n.value, None)

    def emit_AnnAssign(self, n):
        if n.value is None:
            self.err("a declaration needs a value")
        t = self.resolve(n.annotation)
        if not isinstance(t, ScalarType):
            self.err("variable annotations must be f32, i32 or u32")
        return self.assign(n.target, n.value, t.dtype)

    def emit_AugAssign(self, n):
        op = self.binop_kind(n.op, n)
        if isinstance(n.target, ast.Name):
            cur = self.load_name(n.target)
            return self.bind(n.target.id, self.binop(op, n.op, cur, self.expr(n.value)))
        if isinstance(n.target, ast.Subscript):
            arr, idx = self.subscript_parts(n.target)
            cur = self.index_load(arr, idx)
            return self.store(arr, idx, self.binop(op, n.op, cur, self.expr(n.value)))
        self.err("unsupported augmented assignment target")

    def assign(self, target, value_node, annotated: Optional[DType]):
        call = self.builtin_call(value_node)
        if call is not None and call.kind in ("collective", "private", "shared"):
            if not isinstance(target, ast.Name):
                self.err(f"the result of {call.name}() must be assigned to a name")
            if self.depth:
                self.err(f"{call.name}() is only allowed at the top level of the kernel body")
            if call.kind in ("private", "shared"):
                return self.array_decl(target.id, value_node, call.kind)
            arg = self.call_args(value_node, 1)[0]
            v = self.typed(self.expr(arg), annotated)
            self.bind(target.id, v)  # the same checks and bookkeeping as an assignment
            return Collective(target.id, call.payload, v, self.loc())
        v = self.expr(value_node)
        if isinstance(target, ast.Name):
            return self.bind(target.id, self.typed(v, annotated))
        if isinstance(target, ast.Subscript):
            arr, idx = self.subscript_parts(target)
            # a bare literal takes the element type of the buffer or private array
            return self.store(arr, idx, self.typed(v, annotated) if annotated else v)
        self.err("unsupported assignment target")

    def typed(self, v, annotated: Optional[DType]) -> Expr:
        if annotated is None:
            return ir.lift(v)
        if not isinstance(v, Expr):
            return ir.lift(v, ir.const(0, annotated) if annotated.is_number else None)
        if v.dtype is not annotated:
            self.err(f"value is {v.dtype.value}, annotated {annotated.value}")
        return v

    def check_target(self, name: str):
        p = self.params.get(name)
        if p is not None:
            kind = {ParamKind.BUFFER: "buffer (index it)", ParamKind.SCALAR: "scalar parameter",
                    ParamKind.CONST: "Const parameter"}[p.kind]
            self.err(f"cannot assign to {name}: it is a {kind}")
        if name in self.privates or name in self.shared:
            kind = "private" if name in self.privates else "shared"
            self.err(f"cannot assign to {kind} array {name}; index it")
        if name in self.scope and isinstance(self.scope[name], Builtin):
            self.err(f"cannot assign to built-in {name}")

    def bind(self, name: str, v) -> Assign:
        self.check_target(name)
        v = ir.lift(v)
        old = self.vars.get(name)
        if old is not None and old is not v.dtype:
            self.err(f"variable {name} is {old.value} but is assigned {v.dtype.value}"
                     f" (convert with {old.value}(...))")
        self.vars[name] = v.dtype
        self.dead_loop_vars.discard(name)
        return Assign(name, v, self.loc())

    def array_decl(self, name: str, call: ast.Call, kind: str):
        """p = private(dtype, size) or s = shared(dtype, size)."""
        self.check_target(name)
        if name in self.vars:
            self.err(f"{kind} array {name} reuses a variable name")
        dt_node, size_node = self.call_args(call, 2)
        t = self.resolve(dt_node)
        if t is bool:
            dt = DType.BOOL
        elif isinstance(t, ScalarType):
            dt = t.dtype
        else:
            self.err(f"{kind}(dtype, size): dtype must be f32, i32, u32 or bool")
        size = ir.lift(self.expr(size_node))
        (self.privates if kind == "private" else self.shared)[name] = dt
        return (Private if kind == "private" else Shared)(name, dt, size, self.loc())

    def atomic(self, call, n: ast.Call) -> Atomic:
        """atomic_add(target, index, value): target a buffer or a shared array."""
        target, index, value = self.call_args(n, 3)
        name = target.id if isinstance(target, ast.Name) else None
        p = self.params.get(name)
        dt = self.shared.get(name) or (p.dtype if p is not None and p.kind is ParamKind.BUFFER else None)
        if dt is None:
            self.err(f"{call.name}() updates a buffer or a shared array, got {ast.unparse(target)}", n)
        idx = ir.lift(self.expr(index))
        if not idx.dtype.is_int:
            self.err(f"{call.name}() index must be i32 or u32, got {idx.dtype.value}", n)
        v = self.expr(value)
        v = self.typed(v, dt) if not isinstance(v, Expr) and dt.is_number else ir.lift(v)
        if v.dtype is not dt:
            self.err(f"{call.name}() of {v.dtype.value} into {name} of {dt.value}", n)
        return Atomic(call.payload, name, idx, v, self.loc())

    def subscript_parts(self, n: ast.Subscript):
        if not isinstance(n.value, ast.Name):
            self.err("only buffers, private and shared arrays can be indexed", n)
        if isinstance(n.slice, (ast.Slice, ast.Tuple)):
            self.err("index with a single integer expression (buffers are 1-D)", n)
        name = n.value.id
        idx = ir.lift(self.expr(n.slice))
        if not idx.dtype.is_int:
            self.err(f"index must be i32 or u32, got {idx.dtype.value}", n)
        if name in self.privates or name in self.shared:
            return name, idx
        p = self.params.get(name)
        if p is None or p.kind is not ParamKind.BUFFER:
            self.err(f"{name} is not a buffer, a private or a shared array", n)
        return name, idx

    def index_load(self, name: str, idx: Expr) -> Expr:
        if name in self.privates:
            return ir.pload(name, idx, self.privates[name])
        if name in self.shared:
            return ir.sload(name, idx, self.shared[name])
        return ir.load(name, idx, self.params[name].dtype.compute)   # bf16/f16 load as f32

    def store(self, name: str, idx: Expr, v):
        dt = self.privates.get(name) or self.shared.get(name) or self.params[name].dtype.compute
        v = self.typed(v, dt) if not isinstance(v, Expr) else v
        if v.dtype is not dt:
            self.err(f"storing {v.dtype.value} into {name} of {dt.value}")
        if name in self.privates:
            return PStore(name, idx, v, self.loc())
        if name in self.shared:
            return SStore(name, idx, v, self.loc())
        return Store(name, idx, v, self.loc())

    def emit_If(self, n):
        c = ir.lift(self.expr(n.test))
        if c.dtype is not DType.BOOL:
            self.err(f"if condition must be bool, got {c.dtype.value} (compare explicitly)")
        loc = self.loc()
        self.depth += 1
        then = self.stmts(n.body)
        orelse = self.stmts(n.orelse)
        self.depth -= 1
        return If(c, then, orelse, loc)

    def emit_For(self, n):
        if n.orelse:
            self.err("for ... else is not supported")
        if not isinstance(n.target, ast.Name):
            self.err("the loop variable must be a single name")
        call = self.builtin_call(n.iter, allow_python=True)
        if call is not range:
            self.err("only `for i in range(...)` loops are supported")
        args = [ir.lift(self.expr(a)) for a in self.call_args(n.iter, (1, 3))]
        for a in args:
            if a.dtype is not DType.I32:
                self.err(f"range() arguments must be i32, got {a.dtype.value}")
        start, stop, step = ((ir.const(0, DType.I32), args[0], ir.const(1, DType.I32)) if len(args) == 1
                             else (args[0], args[1], ir.const(1, DType.I32)) if len(args) == 2 else args)
        var = n.target.id
        self.check_target(var)
        if var in self.vars and var not in self.dead_loop_vars:
            self.err(f"loop variable {var} reuses a variable name")
        self.vars[var] = DType.I32
        self.dead_loop_vars.discard(var)
        loc = self.loc()
        self.depth += 1
        body = self.stmts(n.body)
        self.depth -= 1
        self.dead_loop_vars.add(var)
        return For(var, start, stop, step, body, loc)

    def emit_While(self, n):
        self.err("while loops are not supported; use for ... in range(...)")

    def emit_Return(self, n):
        self.err("kernels do not return values; store results into a buffer")

    # ------------------------------------------------------------ expressions
    def expr(self, n):
        """An Expr, or a Python int/float/bool for an untyped literal."""
        method = getattr(self, f"x_{type(n).__name__}", None)
        if method is None:
            self.err(f"unsupported expression: {type(n).__name__}", n)
        try:
            return method(n)
        except IRTypeError as e:
            self.err(str(e), n)

    def x_Constant(self, n):
        if isinstance(n.value, (bool, int, float)):
            return n.value
        self.err(f"unsupported literal {n.value!r}", n)

    def x_Name(self, n):
        return self.load_name(n)

    def load_name(self, n: ast.Name):
        name = n.id
        if name in self.params:
            p = self.params[name]
            if p.kind is ParamKind.BUFFER:
                self.err(f"buffer {name} used as a value; index it", n)
            return ir.param(name, p.dtype)
        if name in self.privates or name in self.shared:
            kind = "private" if name in self.privates else "shared"
            self.err(f"{kind} array {name} used as a value; index it", n)
        if name in self.vars:
            if name in self.dead_loop_vars:
                self.err(f"loop variable {name} is not defined after its loop", n)
            return ir.var(name, self.vars[name])
        if name in self.local_names:  # as in Python, not the global or closure of that name
            self.err(f"variable {name} is used before it is assigned", n)
        obj = self.scope.get(name, _MISSING)
        if obj is _MISSING:
            self.err(f"name {name} is not defined", n)
        return self.python_value(obj, n)

    def x_Attribute(self, n):
        return self.python_value(self.resolve(n), n)

    def python_value(self, obj, n):
        if isinstance(obj, (bool, int, float)):
            return obj
        self.err(f"{ast.unparse(n)} is a Python {type(obj).__name__}, not a kernel value", n)

    def binop_kind(self, opnode, n) -> Op:
        op = _BINOPS.get(type(opnode))
        if op is None:
            self.err(f"unsupported operator {type(opnode).__name__}" +
                     (" (write x*x)" if isinstance(opnode, ast.Pow) else ""), n)
        return op

    def binop(self, op: Op, opnode, a, b):
        if not isinstance(a, Expr) and not isinstance(b, Expr):
            a = ir.lift(a)  # two literals: typed by the left one, then IR semantics
        dt = a.dtype if isinstance(a, Expr) else b.dtype
        if isinstance(opnode, ast.Div) and dt.is_int:
            self.err("`/` on integers: use `//` (truncating, as in C) or convert with f32()")
        if isinstance(opnode, ast.FloorDiv) and dt is DType.F32:
            self.err("`//` on f32 is not supported; use `/`")
        if isinstance(opnode, ast.Mod) and dt is DType.F32:
            self.err("`%` on f32 is not supported")
        return ir.binary(op, a, b)

    def x_BinOp(self, n):
        op = self.binop_kind(n.op, n)
        return self.binop(op, n.op, self.expr(n.left), self.expr(n.right))

    def x_UnaryOp(self, n):
        v = self.expr(n.operand)
        if isinstance(n.op, ast.UAdd):
            return v
        if not isinstance(v, Expr) and isinstance(n.op, ast.USub):
            return -v
        v = ir.lift(v)
        if isinstance(n.op, ast.USub):
            return ir.unary(Op.NEG, v)
        if isinstance(n.op, ast.Not):
            if v.dtype is not DType.BOOL:
                self.err(f"`not` needs a bool, got {v.dtype.value}", n)
            return ir.unary(Op.NOT, v)
        if isinstance(n.op, ast.Invert):
            if not v.dtype.is_int:
                self.err(f"`~` needs an integer, got {v.dtype.value}", n)
            return ir.unary(Op.NOT, v)
        self.err("unsupported unary operator", n)

    def x_BoolOp(self, n):
        vals = [ir.lift(self.expr(v)) for v in n.values]
        for v in vals:
            if v.dtype is not DType.BOOL:
                self.err(f"`and`/`or` need bools, got {v.dtype.value}", n)
        # short-circuit: later operands are evaluated only where they matter
        r = vals[-1]
        for v in reversed(vals[:-1]):
            r = ir.select(v, r, False) if isinstance(n.op, ast.And) else ir.select(v, True, r)
        return r

    def x_Compare(self, n):
        operands = [self.expr(n.left)] + [self.expr(c) for c in n.comparators]
        terms = []
        for opnode, a, b in zip(n.ops, operands, operands[1:]):
            op = _CMPOPS.get(type(opnode))
            if op is None:
                self.err(f"unsupported comparison {type(opnode).__name__}", n)
            terms.append(ir.binary(op, a, b))
        r = terms[-1]
        for t in reversed(terms[:-1]):
            r = ir.select(t, r, False)
        return r

    def x_IfExp(self, n):
        c = ir.lift(self.expr(n.test))
        if c.dtype is not DType.BOOL:
            self.err(f"condition must be bool, got {c.dtype.value}", n)
        return ir.select(c, self.expr(n.body), self.expr(n.orelse))

    def x_Subscript(self, n):
        name, idx = self.subscript_parts(n)
        return self.index_load(name, idx)

    def builtin_call(self, n, allow_python=False):
        if not isinstance(n, ast.Call) or not isinstance(n.func, (ast.Name, ast.Attribute)):
            return None
        if isinstance(n.func, ast.Name) and (n.func.id in self.vars or n.func.id in self.params):
            return None
        obj = self.resolve(n.func)
        if isinstance(obj, Builtin) or (allow_python and obj is range):
            return obj
        return None

    def call_args(self, n: ast.Call, count):
        lo, hi = (count, count) if isinstance(count, int) else count
        if n.keywords:
            self.err("keyword arguments are not supported", n)
        if not lo <= len(n.args) <= hi:
            name = ast.unparse(n.func)
            want = lo if lo == hi else f"{lo} to {hi}"
            self.err(f"{name}() takes {want} argument(s), got {len(n.args)}", n)
        return n.args

    def x_Call(self, n):
        if not isinstance(n.func, (ast.Name, ast.Attribute)):
            self.err("unsupported call", n)
        obj = self.resolve(n.func)
        if isinstance(obj, types.BuiltinFunctionType) and obj in _PY_CALLS:
            return self.python_call(_PY_CALLS[obj], n)
        if not isinstance(obj, Builtin):
            self.err(f"{ast.unparse(n.func)}() is not a kernel built-in", n)
        kind = obj.kind
        if kind == "builtin":
            self.call_args(n, 0)
            return ir.builtin(obj.payload)
        if kind == "cast":
            v = self.expr(self.call_args(n, 1)[0])
            if not isinstance(v, Expr):
                if isinstance(v, float) and obj.dtype.is_int:
                    self.err(f"{obj.name}({v!r}): float literal to integer; write an integer", n)
                return ir.const(v, obj.dtype)
            return ir.cast(v, obj.dtype)
        if kind == "bitcast":
            a, t = self.call_args(n, 2)
            target = self.resolve(t)
            if not isinstance(target, ScalarType):
                self.err("bitcast(x, T): T must be f32, i32 or u32", n)
            return ir.bitcast(ir.lift(self.expr(a)), target.dtype)
        if kind in ("sqrt", "math"):
            v = self.expr(self.call_args(n, 1)[0])
            v = ir.lift(float(v)) if not isinstance(v, Expr) else v
            if v.dtype is not DType.F32:
                self.err(f"{obj.name}() needs f32, got {v.dtype.value}", n)
            return ir.unary(Op.SQRT, v) if kind == "sqrt" else ir.math(obj.name, v)
        if kind == "fma":
            args = [self.expr(x) for x in self.call_args(n, 3)]
            args = [v if isinstance(v, Expr) else ir.lift(v if isinstance(v, bool) else float(v)) for v in args]
            if any(v.dtype is not DType.F32 for v in args):
                self.err(f"fma() needs three f32 operands, got {', '.join(v.dtype.value for v in args)}", n)
            return ir.fma(*args)
        if kind == "collective":
            self.err(f"{obj.name}() must be the whole right-hand side of an assignment at the top "
                     "level of the kernel body", n)
        if kind in ("private", "shared"):
            self.err(f"{kind}() must be assigned to a name at the top level of the kernel body", n)
        if kind in ("barrier", "atomic"):
            self.err(f"{obj.name}() returns no value: write it as a statement of its own", n)
        self.err(f"unsupported built-in {obj.name}", n)

    def python_call(self, d, n: ast.Call):
        """min(a, b), max(a, b), abs(x), len(buf): the operation `d` spelled as a Python built-in."""
        if d.arg == "buffer":   # the operand is a buffer's name, not a value
            a = self.call_args(n, 1)[0]
            if not (isinstance(a, ast.Name) and a.id in self.params
                    and self.params[a.id].kind is ParamKind.BUFFER):
                self.err(f"{d.spelling.text}() takes a buffer parameter", n)
            return ir.builtin(d.op, a.id)
        vals = [self.expr(x) for x in self.call_args(n, d.arity)]
        return ir.unary(d.op, ir.lift(vals[0])) if d.arity == 1 else ir.binary(d.op, *vals)


_MISSING = object()


class KernelFunction:
    """A parsed kernel: `.ir` is its IR (validated), `.fn` the Python function."""

    def __init__(self, fn, block: int):
        self.fn = fn
        self.block = block
        self.ir: Kernel = _Emitter(fn, block).kernel()
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    def __repr__(self) -> str:
        return f"<cohort kernel {self.ir.name} block={self.block}>"

    def interpret(self, n: int, consts: Optional[dict] = None, **args):
        from .interpreter import interpret
        return interpret(self.ir, n, args, consts)


def kernel(fn=None, *, block: int = 32):
    """`@kernel` or `@kernel(block=32)`: parse a Python function into a kernel."""
    from .spec import MAX_BLOCK
    if not isinstance(block, int) or block < 1 or block & (block - 1) or block > MAX_BLOCK:
        raise ValueError(f"block must be a power of two from 1 to {MAX_BLOCK}, got {block!r}")
    if fn is None:
        return lambda f: KernelFunction(f, block)
    return KernelFunction(fn, block)
