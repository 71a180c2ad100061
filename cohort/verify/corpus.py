"""Replayable fuzz cases: kernel IR as JSON, launch, inputs seed, variants, expected outcome.

A case file (`tests/corpus/*.json`) holds everything needed to re-run one
generated (or hand-written) kernel in a fresh process, on any machine:

    {"format": "cohort-case/1",
     "name": "...",                        # file stem
     "kernel": {...},                      # the IR, see kernel_to_json
     "n": 33, "consts": {"C0": 3},
     "buffers": [{"name": "x0", "dtype": "f32", "length": 148, "fill": "data"}, ...],
     "scalars": {"sf": {"dtype": "f32", "bits": "0x7fc00000"}, ...},
     "inputs_seed": 12345,                 # buffer contents: gen.make_args
     "variants": ["lanes=8,..."] | "all", # what to replay ("all": the fuzzer's knob matrix)
     "expected": "agree" | "known_failure",
     "note": "...", "found": {...}}        # provenance: failure kind, description, printed kernel

The IR serializer covers every node and statement of `refimpl.ir`. Expressions
are a DAG (a node may be shared, and the backend's lane annotations are keyed
by node identity), so they are stored as a node table in dependency order and
statements refer to node indices: a round trip keeps the sharing. Float
literals are stored as their 32 bits (NaN payloads, -0.0 and infinities
survive), source locations as (line, text).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Optional

import numpy as np

from ..refimpl.ir import (
    DTYPE_BY_NAME,
    STMT_BY_TAG,
    DType,
    Expr,
    Field,
    Kernel,
    Loc,
    Op,
    Param,
    ParamKind,
    stmt_def,
)
from ..refimpl.opdefs import OPDEFS
from .files import write_atomic
from .gen.case import FILLS

KERNEL_FORMAT = "cohort-kernel/1"
CASE_FORMAT = "cohort-case/1"


class CorpusError(ValueError):
    """A case or kernel document that cannot be read (with the reason)."""


# ---------------------------------------------------------------- values

def f32_bits(v: float) -> str:
    return f"0x{int(np.asarray(v, np.float32).view(np.uint32)):08x}"


def f32_from_bits(text: str) -> float:
    return float(np.asarray(int(text, 16), np.uint32).view(np.float32))


def _const_to_json(value, dt: DType):
    if dt is DType.F32:
        return {"f32": f32_bits(value)}
    if dt is DType.BOOL:
        return bool(value)
    return int(value)


def _const_from_json(doc, dt: DType):
    if dt is DType.F32:
        if not isinstance(doc, dict) or "f32" not in doc:
            raise CorpusError(f"f32 literal must be {{'f32': '0x...'}}, got {doc!r}")
        return f32_from_bits(doc["f32"])
    if dt is DType.BOOL:
        return bool(doc)
    return int(doc)


def scalar_to_json(value, dt: DType) -> dict:
    if dt is DType.F32:
        return {"dtype": "f32", "bits": f32_bits(value)}
    return {"dtype": dt.value, "value": int(value)}


def scalar_from_json(doc: dict):
    dt = _dtype(doc.get("dtype"))
    if dt is DType.F32:
        return np.float32(f32_from_bits(doc["bits"]))
    return dt.np.type(int(doc["value"]))


def _dtype(name) -> DType:
    try:
        return DTYPE_BY_NAME[name]
    except KeyError:
        raise CorpusError(f"unknown dtype {name!r}") from None


def _loc_to_json(loc: Loc):
    if loc.line is None and not loc.text:
        return None
    return {"line": loc.line, "text": loc.text}


def _loc_from_json(doc) -> Loc:
    if doc is None:
        return Loc()
    return Loc(doc.get("line"), doc.get("text", ""))


# ---------------------------------------------------------------- kernels

class _Nodes:
    """Expression nodes in dependency order, each once (sharing preserved)."""

    def __init__(self):
        self.index: dict = {}
        self.table: list = []

    def add(self, e: Expr) -> int:
        i = self.index.get(id(e))
        if i is not None:
            return i
        stack = [(e, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in self.index:
                continue
            if not ready:
                stack.append((node, True))
                stack.extend((s, False) for s in reversed(node.src) if id(s) not in self.index)
                continue
            doc = {"op": node.op.name, "dtype": node.dtype.value}
            if node.src:
                doc["src"] = [self.index[id(s)] for s in node.src]
            if OPDEFS[node.op].arg == "literal":
                doc["arg"] = _const_to_json(node.arg, node.dtype)
            elif node.arg is not None:
                if not isinstance(node.arg, (str, int)) or isinstance(node.arg, bool):
                    raise CorpusError(f"cannot serialise argument {node.arg!r} of {node.op.name}")
                doc["arg"] = node.arg
            self.index[id(node)] = len(self.table)
            self.table.append(doc)
        return self.index[id(e)]


def _stmt_to_json(s, nodes: _Nodes) -> dict:
    try:
        d = stmt_def(s)
    except TypeError:
        raise CorpusError(f"cannot serialise statement {type(s).__name__}") from None
    doc = {"kind": d.tag}
    for f, kind, _ in d.fields:
        v = getattr(s, f)
        doc[f] = (nodes.add(v) if kind is Field.EXPR else [_stmt_to_json(x, nodes) for x in v]
                  if kind is Field.BODY else v.value if kind in (Field.DTYPE, Field.ENUM) else v)
    loc = _loc_to_json(s.loc)
    if loc is not None:
        doc["loc"] = loc
    return doc


def kernel_to_json(k: Kernel) -> dict:
    """A JSON-ready document for `k` (any kernel: generated, frontend-built, specialised)."""
    nodes = _Nodes()
    body = [_stmt_to_json(s, nodes) for s in k.body]
    return {
        "format": KERNEL_FORMAT,
        "name": k.name,
        "block": k.block,
        "params": [{"name": p.name, "kind": p.kind.value, "dtype": p.dtype.value} for p in k.params],
        "consts": [[name, int(v)] for name, v in k.consts],
        "specialised": bool(k.specialised),
        "nodes": nodes.table,
        "body": body,
    }


def _arg_problem(kind: Optional[str], arg) -> Optional[str]:
    """What is wrong with a node's `arg` for the registry's kind of arg (opdefs.OpDef.arg), if anything."""
    if kind is None:
        return None if arg is None else "no argument"
    if kind == "placeholder":
        return None if isinstance(arg, int) and not isinstance(arg, bool) else "an index"
    return None if isinstance(arg, str) else f"a {kind} name"


def kernel_from_json(doc: dict) -> Kernel:
    """The kernel of a `kernel_to_json` document (not validated: call spec.validate)."""
    if not isinstance(doc, dict) or doc.get("format") != KERNEL_FORMAT:
        raise CorpusError(f"not a {KERNEL_FORMAT} document")
    built: list = []
    for i, nd in enumerate(doc["nodes"]):
        try:
            op = Op[nd["op"]]
        except KeyError:
            raise CorpusError(f"node {i}: unknown op {nd.get('op')!r}") from None
        dt = _dtype(nd["dtype"])
        src = []
        for j in nd.get("src", ()):
            if not isinstance(j, int) or not 0 <= j < i:
                raise CorpusError(f"node {i}: source {j!r} is not an earlier node")
            src.append(built[j])
        arg, kind = nd.get("arg"), OPDEFS[op].arg
        if kind == "literal":
            arg = _const_from_json(arg, dt)
        elif _arg_problem(kind, arg):
            raise CorpusError(f"node {i}: {op.name} takes {_arg_problem(kind, arg)}, got {arg!r}")
        built.append(Expr(op, dt, tuple(src), arg))

    def node(j):
        if not isinstance(j, int) or not 0 <= j < len(built):
            raise CorpusError(f"statement refers to missing node {j!r}")
        return built[j]

    def stmt(d):
        sd = STMT_BY_TAG.get(d.get("kind"))
        if sd is None:
            raise CorpusError(f"unknown statement kind {d.get('kind')!r}")
        vals = []
        for f, kind, enum_cls in sd.fields:
            if f not in d:
                raise CorpusError(f"{sd.tag} statement without {f!r}")
            v = d[f]
            if kind is Field.EXPR:
                v = node(v)
            elif kind is Field.BODY:
                v = tuple(stmt(x) for x in v)
            elif kind is Field.DTYPE:
                v = _dtype(v)
            elif kind is Field.ENUM:
                try:
                    v = enum_cls(v)
                except ValueError:
                    raise CorpusError(f"{sd.tag} statement: {f} {v!r} is not one of "
                                      f"{[m.value for m in enum_cls]}") from None
            elif not isinstance(v, str):
                raise CorpusError(f"{sd.tag} statement: {f} must be a name, got {v!r}")
            vals.append(v)
        return sd.cls(*vals, _loc_from_json(d.get("loc")))

    params = tuple(Param(p["name"], ParamKind(p["kind"]), _dtype(p["dtype"])) for p in doc["params"])
    return Kernel(doc["name"], params, tuple(stmt(s) for s in doc["body"]), int(doc["block"]),
                  tuple((name, int(v)) for name, v in doc.get("consts", ())), bool(doc.get("specialised")))


def kernel_digest(k: Kernel) -> str:
    """A stable hash of a kernel's full structure (sharing and literal bits included)."""
    text = json.dumps(kernel_to_json(k), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- cases

def case_to_json(case, **extra) -> dict:
    """A case document; `extra` adds variants, expected, note, found, name."""
    scalars = {}
    for p in case.kernel.scalars:
        scalars[p.name] = scalar_to_json(case.scalars[p.name], p.dtype)
    doc = {
        "format": CASE_FORMAT,
        "kernel": kernel_to_json(case.kernel),
        "n": int(case.n),
        "consts": {k: int(v) for k, v in sorted(case.consts.items())},
        "buffers": [{"name": b.name, "dtype": b.dtype.value, "length": int(b.length), "fill": b.fill,
                     **({"stream": int(b.stream)} if b.stream else {})} for b in case.buffers],
        "scalars": scalars,
        "inputs_seed": int(case.seed),
    }
    doc.update({k: v for k, v in extra.items() if v is not None})
    return doc


# A case file is input: its sizes are bounded before anything is allocated (fuzz cases are
# small; the limit leaves room for hand-written ones), its variants parsed before any compile.
MAX_THREADS = 1 << 24
MAX_ELEMENTS = 1 << 24       # per buffer; filling one takes 16 bytes per element
EXPECTED = ("agree", "known_failure")


def case_from_json(doc: dict):
    """The case of a case document; CorpusError (one line) for anything malformed or too big."""
    if not isinstance(doc, dict) or doc.get("format") != CASE_FORMAT:
        raise CorpusError(f"not a {CASE_FORMAT} document")
    try:
        return _case_from_json(doc)
    except CorpusError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as e:
        what = f"missing {e}" if isinstance(e, KeyError) else str(e) or type(e).__name__
        raise CorpusError(f"malformed {CASE_FORMAT} document: {what}") from None


def _count(doc, key: str, lo: int, hi: int) -> int:
    v = doc[key]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise CorpusError(f"{key} must be an integer in {lo}..{hi}, got {v!r:.40}")
    return v


def _case_from_json(doc: dict):
    from .gen import BufferSpec, Case
    n = _count(doc, "n", 1, MAX_THREADS)
    seed = _count(doc, "inputs_seed", 0, 2 ** 63 - 1)
    buffers = []
    for b in doc["buffers"]:
        length = _count(b, "length", 1, MAX_ELEMENTS)
        fill = b.get("fill", "data")
        if fill not in FILLS:
            raise CorpusError(f"buffer {b.get('name')!r:.40}: unknown fill {fill!r:.40}")
        buffers.append(BufferSpec(str(b["name"]), _dtype(b["dtype"]), length, fill, int(b.get("stream", 0))))
    variants = doc.get("variants", "all")
    if variants != "all":
        from ..backend.variant import VariantError, parse_variant
        if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
            raise CorpusError("variants must be \"all\" or a list of variant spellings")
        for v in variants:
            try:
                parse_variant(v)
            except VariantError as e:
                raise CorpusError(f"variant {v!r:.80}: {e}") from None
    if doc.get("expected", "agree") not in EXPECTED:
        raise CorpusError(f"expected must be one of {', '.join(EXPECTED)}, got {doc.get('expected')!r:.40}")
    block = _count(doc["kernel"], "block", 1, 1024)
    if block & (block - 1):
        raise CorpusError(f"block must be a power of two, got {block}")
    kernel = kernel_from_json(doc["kernel"])
    scalars = {name: scalar_from_json(s) for name, s in doc.get("scalars", {}).items()}
    return Case(kernel, n, {k: int(v) for k, v in doc.get("consts", {}).items()}, tuple(buffers), scalars, seed)


def case_key(case) -> str:
    """Identity of a case (kernel structure, launch, inputs): equal keys, equal runs."""
    doc = case_to_json(case)
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def save_case(directory: str, case, name: Optional[str] = None, **extra) -> str:
    """Write a case file; returns its path. The name defaults to a hash of the case."""
    os.makedirs(directory, exist_ok=True)
    name = name or f"case-{case_key(case)[:12]}"
    from ..refimpl.printer import format_kernel
    doc = case_to_json(case, name=name, **extra)
    doc["printed"] = format_kernel(case.kernel).splitlines()   # for readers; ignored on load
    path = os.path.join(directory, f"{name}.json")
    text = dumps(doc) + "\n"
    write_atomic(path, lambda f: f.write(text))
    return path


def dumps(doc: dict) -> str:
    """JSON with one expression node (and one printed line) per line: readable diffs."""
    kernel = doc.get("kernel", doc)
    nodes, printed = kernel.get("nodes"), doc.get("printed")
    marks = {}
    if nodes is not None:
        kernel["nodes"] = "@@NODES@@"
        marks['"@@NODES@@"'] = "[\n" + ",\n".join("   " + json.dumps(n) for n in nodes) + "\n  ]"
    if printed is not None:
        doc["printed"] = "@@PRINTED@@"
        marks['"@@PRINTED@@"'] = "[\n" + ",\n".join("  " + json.dumps(x) for x in printed) + "\n ]"
    text = json.dumps(doc, indent=1)
    for mark, value in marks.items():
        text = text.replace(mark, value, 1)
    if nodes is not None:
        kernel["nodes"] = nodes
    if printed is not None:
        doc["printed"] = printed
    return text


def load_case(path: str):
    """(case, document) from a case file; CorpusError naming the file if it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:      # ValueError: JSON and UTF-8 errors
        raise CorpusError(f"{path}: {e}") from None
    try:
        return case_from_json(doc), doc
    except CorpusError as e:
        raise CorpusError(f"{path}: {e}") from None


def case_files(directory: str) -> list:
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, f) for f in os.listdir(directory)
                  if f.endswith(".json") and not f.startswith("."))


def replay(doc_or_path, variants=None) -> dict:
    """Re-run a case in this process: the interpreter and each listed variant.

    Returns the fuzzer's run record (`execute.execute`): a discard reason if the
    interpreter rejects the launch, else a status per variant.
    """
    from .execute import execute
    from .matrix import variants_for
    if isinstance(doc_or_path, str):
        case, doc = load_case(doc_or_path)
    else:
        doc = doc_or_path
        case = case_from_json(doc)
    if variants is None:
        variants = doc.get("variants", "all")
    if variants == "all":
        variants = variants_for(case)
    return execute(case, list(variants))
