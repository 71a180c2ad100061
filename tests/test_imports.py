"""The `cohort` package has no import cycle and no module uses another module's private names.

The graph is built from the source with `ast`, never by importing, so a cycle Python happens to
survive (because of the order of the lines in an `__init__`) is still found.

What counts as an import (an edge A -> B):
- every `import` / `from ... import` statement anywhere in A: at module level, inside a function
  or method, under `if`/`try`. An import moved into a function still makes A need B; it only
  postpones the moment, so it hides a cycle instead of removing it and counts here like any other.
- `from P import x` is an edge to the submodule P.x when P.x is a module, otherwise to P (the
  name is P's, even when P is a package whose `__init__` re-exports it).
- the package `__init__` Python runs before a submodule is NOT an edge: every module of a package
  would otherwise form a cycle with an `__init__` that re-exports it. An `__init__` is a node like
  any other when a module imports a name from it (`from cohort.backend import compile_kernel`).
No `importlib`/`__import__` call inside cohort names a cohort module (test below).

A private name is a name with one leading underscore (`_fast_path`, `_TABLE`; dunders such as
`__version__` are public). A module M uses another module's private name when, outside M:
- `from M import _name` (M a cohort module or package, `_name` not a submodule), or
- `alias._name` where `alias` is bound in the file to the module M by `import M`, `import M as
  alias` or `from P import M` (chains like `cohort.backend.bounds._name` resolve the same way).
Attribute access on objects (`kernel._fn`) is not seen: the type of an object is not known
statically. A deliberately shared name is made public; a name only one module needs lives there.
"""
import ast
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cohort")

# Being removed on other branches; the lead empties these after merging them. An entry that is
# no longer a cycle (or no longer used) fails test_the_allow_list_is_current, so it cannot rot.
KNOWN_ELSEWHERE = [
    # AutoChoice (runtime) calls compile_kernel (compiler); the launch-route work removes it
    frozenset({"cohort.backend.compiler", "cohort.backend.runtime"}),
]
# (importer, owner, name): private names shared by files that are being reworked on those branches.
KNOWN_ELSEWHERE_PRIVATE: set = set()


def _modules() -> dict:
    """module name -> path, for every .py file under cohort/."""
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _owner(dotted: str):
    """The longest cohort module that `dotted` starts with, and the rest of the name."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        mod = ".".join(parts[:k])
        if mod in MODULES:
            return mod, parts[k:]
    return None, parts


def _scan(name: str):
    """(the cohort modules `name` imports, its uses of other modules' private names)."""
    path = MODULES[name]
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    tree = ast.parse(open(path).read(), path)
    edges, private, aliases = set(), set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                mod, _ = _owner(a.name)
                if mod:
                    edges.add(mod)
                    if a.asname:
                        aliases[a.asname] = mod
                    else:                        # `import cohort.x.y` binds `cohort`
                        aliases[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                src = f"{base}.{node.module}" if node.module else base
            else:
                src = node.module
            if src not in MODULES:
                continue
            for a in node.names:
                sub = f"{src}.{a.name}"
                if sub in MODULES:
                    edges.add(sub)
                    aliases[a.asname or a.name] = sub
                else:
                    edges.add(src)
                    if _private(a.name):
                        private.add((name, src, a.name, node.lineno))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in aliases:
                mod, rest = _owner(".".join([aliases[value.id]] + chain[:0:-1] + [node.attr]))
                if mod and mod != name and rest == [node.attr]:
                    private.add((name, mod, node.attr, node.lineno))
    edges.discard(name)
    return edges, private


SCANS = {name: _scan(name) for name in MODULES}
GRAPH = {name: s[0] for name, s in SCANS.items()}
PRIVATE = {u for s in SCANS.values() for u in s[1]}


def _components() -> list:
    """The strongly connected components of GRAPH with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def _a_cycle(comp: frozenset) -> list:
    """One shortest cycle through the first module of `comp`, for the message."""
    start = min(comp)
    paths, seen = [[start]], {start}
    while paths:
        nxt = []
        for p in paths:
            for w in sorted(GRAPH[p[-1]] & comp):
                if w == start:
                    return p + [start]
                if w not in seen:
                    seen.add(w)
                    nxt.append(p + [w])
        paths = nxt
    return []


def _describe(comp: frozenset) -> str:
    short = lambda m: m.removeprefix("cohort.")                      # noqa: E731
    return (f"{len(comp)} modules {sorted(map(short, comp))}; e.g. "
            + " -> ".join(map(short, _a_cycle(comp))))


def test_the_graph_sees_every_kind_of_import():
    assert {"cohort.refimpl.interpreter", "cohort.backend.compiler", "cohort.verify.fuzz.campaign",
            "cohort.audit.harness", "cohort.cli"} <= set(MODULES)
    assert "cohort.backend.claims" in GRAPH["cohort.backend.lowering.core"]
    assert "cohort.verify.corpus" in GRAPH["cohort.verify.fuzz.workers"]      # `from .. import corpus`


def test_the_scanner_finds_what_it_claims(tmp_path, monkeypatch):
    """Cycles through function-level imports and every spelling of a private use are caught."""
    pkg = tmp_path / "cohort"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cohort.b import _x, y\nimport cohort.b as bee\nbee._z\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a._w\nimport cohort.a\ncohort.a._v\n")
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "ROOT", str(pkg))
    monkeypatch.setattr(here, "MODULES", _modules())
    assert _scan("cohort.a") == ({"cohort.b"}, {("cohort.a", "cohort.b", "_x", 1), ("cohort.a", "cohort.b", "_z", 3)})
    assert _scan("cohort.b") == ({"cohort.a"}, {("cohort.b", "cohort.a", "_w", 3), ("cohort.b", "cohort.a", "_v", 5)})


def test_no_dynamic_imports_of_cohort():
    """The static graph is the whole graph: no `import_module`/`__import__` call in cohort names a
    cohort module or a relative one (triton's and transformers' modules are imported that way)."""
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__"):
                text = ast.unparse(node.args[0]) if node.args else ""
                relative = text.lstrip("f'\"").startswith(".") or any(k.arg == "package" for k in node.keywords)
                assert "cohort" not in text and not relative, f"{name}:{node.lineno} imports {text} dynamically"


def test_no_import_cycle():
    cycles = [c for c in _components() if c not in KNOWN_ELSEWHERE]
    assert not cycles, "import cycles:\n" + "\n".join(_describe(c) for c in cycles)


def test_no_module_uses_another_modules_private_names():
    uses = sorted(u for u in PRIVATE if u[:3] not in KNOWN_ELSEWHERE_PRIVATE)
    assert not uses, "private names used outside their module:\n" + "\n".join(
        f"{a}:{line} uses {b}.{n}" for a, b, n, line in uses)


def test_the_allow_list_is_current():
    """Once another branch removes an allowed cycle or private use, its entry must go."""
    comps = _components()
    assert [c for c in KNOWN_ELSEWHERE if c not in comps] == []
    assert KNOWN_ELSEWHERE_PRIVATE <= {u[:3] for u in PRIVATE}

