"""The build's CodegenConfig (backend/codegen.py): resolved once per build, its key is the
compile key, and the lowering asks it rather than the environment or the target."""
import pathlib
import re
from dataclasses import replace

import numpy as np
import pytest

from cohort import Buffer, f32, fma, global_id, kernel
from cohort.backend import codegen, compiler, jit, target
from cohort.backend.compiler import cache_key, compile_kernel
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.backend.lowering import Lowering
from cohort.backend.variant import parse_variant
from cohort.knobs import F16, FMA, MASKED_STORE
from cohort.refimpl.interpreter import interpret
from cohort.refimpl.specialize import specialize

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKET = parse_variant("packet")


@kernel(block=32)
def fused(x: Buffer[f32], y: Buffer[f32]):
    i = global_id()
    v = fma(x[i], x[i], 1.0)
    if v > 1.5:
        y[i] = v


K = specialize(fused.ir, {})


def _ir(config) -> str:
    return str(Lowering(K, "entry", config).lower())


def test_resolve_reads_the_knobs_the_target_the_bugs_and_the_level(monkeypatch):
    for k in (FMA, F16, MASKED_STORE):
        monkeypatch.delenv(k.name, raising=False)
    host = target.host()
    c = codegen.resolve(PACKET)
    assert c.variant == PACKET and c.target == host and c.bugs == () and c.level == jit.FULL
    assert c.fma == ("hardware" if host.native_fma else "software")
    assert c.f16 == ("hardware" if host.native_half else "software")
    assert c.masked_store == ("dispatch" if host.slow_masked_store else "intrinsic")
    assert codegen.resolve(PACKET) is c                     # memoised on what it reads
    monkeypatch.setenv(FMA.name, "software")
    assert codegen.resolve(PACKET).fma == "software"
    with inject_bug_TESTING_ONLY("tree_order"), jit.quick_compiles(0):
        q = codegen.resolve(PACKET)
        assert q.bugs == ("tree_order",) and q.level == 0 and q.key.endswith("/quick0")
    with target.use(target.from_triple("x86_64-unknown-linux-gnu")):
        monkeypatch.delenv(FMA.name)
        assert codegen.resolve(PACKET).fma == "software"    # a baseline x86-64 has no FMA


def test_the_key_is_what_changes_code():
    c = codegen.resolve(PACKET)
    assert codegen.resolve(replace(PACKET, grain=4, workers=2)).key == c.key   # how it runs, not its code
    for other in (replace(c, fma="software" if c.fma == "hardware" else "hardware"),
                  replace(c, masked_store="dispatch" if c.masked_store == "intrinsic" else "intrinsic"),
                  replace(c, f16="software" if c.f16 == "hardware" else "hardware"),
                  replace(c, bugs=("tree_order",)), replace(c, level=1),
                  c.with_variant(parse_variant("packet-masked"))):
        assert other.key != c.key and cache_key(K, other) != cache_key(K, c)
    full = replace(c, full_blocks=True)
    assert cache_key(K, full) == cache_key(K, c) + "/full_blocks"   # one symbol prefix for both forms


def test_the_lowering_asks_the_record_not_the_environment(monkeypatch):
    monkeypatch.setenv(FMA.name, "hardware")
    monkeypatch.setenv(MASKED_STORE.name, "intrinsic")
    c = codegen.resolve(PACKET)
    assert "llvm.fma" in _ir(c) and "llvm.masked.store" in _ir(c)
    soft = _ir(replace(c, fma="software"))
    assert "llvm.fma" not in soft and "fpext" in soft
    # dispatch: one vector register's lanes at a time, so a store per register of the target
    narrow = replace(c, masked_store="dispatch", target=target.from_triple("x86_64-unknown-linux-gnu", "znver3",
                                                                             "+avx,+avx2,+fma"))
    text = _ir(narrow)
    assert "llvm.masked.store.v8f32" in text and "llvm.masked.store.v32f32" not in text


def test_a_build_keeps_its_config_for_its_later_forms(monkeypatch):
    """The general build (for launches the whole-blocks build refuses) and the checked twin are
    compiled when a launch first needs them, with the build's configuration, not whatever the
    environment says then."""
    monkeypatch.setenv(MASKED_STORE.name, "dispatch")
    ck = compile_kernel(fused, None, "packet,interleave=1", n=64)
    assert ck.code.full_blocks and ck.config.masked_store == "dispatch"
    monkeypatch.setenv(MASKED_STORE.name, "intrinsic")
    general = ck.code_for(40)
    assert not general.full_blocks and general.config == replace(ck.config, full_blocks=False)
    assert general.config.masked_store == "dispatch"
    x = np.linspace(0, 2, 40, dtype=np.float32)
    y = np.zeros(40, np.float32)
    ck.launch(40, {"x": x, "y": y}, verify="never")
    want = np.zeros(40, np.float32)
    interpret(fused.ir, 40, {"x": x, "y": want})
    assert np.array_equal(y, want) and ck.code_for(40) is general


def test_only_codegen_py_decides_the_switches():
    """The rule exists once: no other module reads the codegen knobs or asks the target for a
    choice the config holds."""
    pattern = re.compile(r"knobs\.(FMA|F16|MASKED_STORE)\b|\.(native_fma|native_half|slow_masked_store)\b"
                         r"|_lowering\(\)|jit\.level\(\)|target\.current\(\)")
    offenders = []
    for path in sorted((ROOT / "cohort" / "backend").rglob("*.py")):
        if path.name in ("codegen.py", "target.py", "jit.py", "facts.py"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line.split("#")[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "ask the build's CodegenConfig (backend/codegen.py):\n" + "\n".join(offenders)


def test_the_handle_cache_is_keyed_by_the_config(monkeypatch):
    monkeypatch.setenv(MASKED_STORE.name, "intrinsic")
    a = compile_kernel(fused, None, "packet")
    monkeypatch.setenv(MASKED_STORE.name, "dispatch")
    b = compile_kernel(fused, None, "packet")
    assert a is not b and a.code is not b.code and b.config.masked_store == "dispatch"
    monkeypatch.setenv(MASKED_STORE.name, "intrinsic")
    assert compile_kernel(fused, None, "packet") is a
    key = compiler._handle_key(fused.ir, None, codegen.resolve(PACKET), None)
    assert compiler._handles[key] is a


@pytest.mark.parametrize("variant", ["whole", "packet"])
def test_cross_compile_resolves_for_the_target(variant, monkeypatch):
    monkeypatch.delenv(FMA.name, raising=False)
    text = compiler.cross_compile(fused, target.from_triple("x86_64-unknown-linux-gnu"), variant, kind="ir")
    assert "llvm.fma" not in text                         # the target has no FMA: the software sequence
    text = compiler.cross_compile(fused, target.from_triple("aarch64-unknown-linux-gnu"), variant, kind="ir")
    assert "llvm.fma" in text
