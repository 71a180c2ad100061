"""The layers import only downwards (DESIGN §1), checked on the source of every module
(`ast`: imports inside functions count too):

    refimpl (semantics)  <  backend  <  verify, torch  <  audit  <  cli

refimpl imports nothing of backend, verify, audit; backend nothing of verify, audit;
verify nothing of audit. The verify package has no import cycle (corpus and the fuzzer
included). The whole package's cycles and private-name imports are tests/test_imports.py's.
"""
import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cohort")
# cli_options: cli.py's checks; torch (cohort.torch) builds on backend, and the audit times it
LAYERS = {"refimpl": 0, "backend": 1, "verify": 2, "torch": 2, "triton": 2, "audit": 3, "cli": 4, "cli_options": 4,
          "cli_check": 4, "cli_fuzz": 4}


def modules() -> dict:
    """module name -> path, for every .py file under cohort/."""
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


MODULES = modules()


def imports(name: str) -> set:
    """The cohort modules `name` imports (a `from package import submodule` names the submodule)."""
    path = MODULES[name]
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:       # a name inside a module: the module
                t = t.rpartition(".")[0]
            if t and t.startswith("cohort"):
                found.add(t)
    return found


GRAPH = {name: imports(name) for name in MODULES}


def layer(name: str):
    parts = name.split(".")
    if len(parts) == 1:
        return None                              # the package's own __init__: the public API
    return LAYERS.get(parts[1].removesuffix(".py"), None)


def test_the_rules_see_every_module():
    assert {"cohort.refimpl.interpreter", "cohort.backend.claims", "cohort.verify.compare",
            "cohort.verify.fuzz.campaign", "cohort.audit.harness", "cohort.cli"} <= set(MODULES)
    assert "cohort.backend.claims" in GRAPH["cohort.backend.lowering.core"]
    assert "cohort.verify.corpus" in GRAPH["cohort.verify.fuzz.workers"]      # `from .. import corpus`


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down_the_layers(name):
    mine = layer(name)
    if mine is None:
        return
    for target in GRAPH[name]:
        theirs = layer(target)
        if theirs is None:                       # `from cohort import kernel` (ops written as users write)
            assert all(layer(t) == 0 for t in GRAPH[target]), "cohort/__init__ must re-export refimpl only"
            continue
        assert theirs <= mine, f"{name} (layer {mine}) imports {target} (layer {theirs})"


def test_semantics_know_nothing_of_the_backends_claims():
    for name in MODULES:
        if layer(name) == 0:
            assert "cohort.backend.claims" not in GRAPH[name], name


def _cycle(nodes: set):
    """One import cycle among `nodes`, or None."""
    state = {}

    def visit(n, path):
        state[n] = "open"
        for m in sorted(GRAPH[n] & nodes):
            if state.get(m) == "open":
                return path[path.index(m):] + [m]
            if m not in state:
                found = visit(m, path + [m])
                if found:
                    return found
        state[n] = "done"
        return None

    for n in sorted(nodes):
        if n not in state:
            found = visit(n, [n])
            if found:
                return found
    return None


def test_verification_has_no_import_cycle():
    verify = {n for n in MODULES if n.startswith("cohort.verify.")}
    # a package's __init__ re-exports its modules; the cycle that matters is between modules
    nodes = {n for n in verify if not MODULES[n].endswith("__init__.py")}
    assert _cycle(nodes) is None, " -> ".join(_cycle(nodes))
    assert "cohort.verify.fuzz" not in GRAPH["cohort.verify.corpus"]
    assert not any(t.startswith("cohort.verify.fuzz") for t in GRAPH["cohort.verify.corpus"])

