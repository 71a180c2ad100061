"""The differential fuzzer (issue 5): its generator makes valid, well-defined kernels that
reach every IR construct; a clean backend survives a fixed-seed campaign; every deliberate
backend bug (cohort.backend.inject.BUGS) is caught by a short one; failures shrink, are
written as replayable cases, and a crashing compile is reported, not fatal."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

from cohort import Buffer, f32, global_id, kernel, knobs
from cohort.backend.inject import BUGS, inject_bug_TESTING_ONLY
from cohort.backend.variant import parse_variant
from cohort.refimpl.interpreter import KernelRuntimeError, interpret
from cohort.refimpl.ir import DType
from cohort.refimpl.spec import validate
from cohort.refimpl.specialize import specialize
from cohort.verify import corpus
from cohort.verify.fuzz import DEFAULT_VARIANTS, KNOB_MATRIX, Coverage, WorkerPool, execute, run_campaign, variants_for
from cohort.verify.gen import BufferSpec, Case, cases, fill, make_args

# Every campaign here is bounded by a number of programs (deterministic for the seed), so
# what a test sees does not depend on how loaded the machine is. The time box is only a
# backstop against a hang, far above what the programs take.
CLEAN_PROGRAMS = knobs.FUZZ_CI_PROGRAMS.get()
BACKSTOP_SECONDS = 3600.0


def collect(n: int, first_seed: int = 0, **kw) -> list:
    """n generated cases, drawn the way campaigns draw them (Hypothesis runs of 9)."""
    out = []
    s = first_seed
    while len(out) < n:
        @settings(max_examples=9, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @seed(s)
        @given(cases(**kw))
        def grab(case):
            out.append(case)
        grab()
        s += 1
    return out[:n]


# ---------------------------------------------------------------- the generator

@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_generated_cases_are_valid_and_well_defined(case):
    validate(case.kernel)
    specialize(case.kernel, case.consts)
    # by construction: in bounds (but one access one past the edge of xe or ye: an expected-error
    # program, gen/boundary.py), no conflicts or races, no division by zero, no bad shifts
    try:
        interpret(case.kernel, case.n, make_args(case), case.consts)
    except KernelRuntimeError as e:
        from cohort.verify.execute import error_facts
        assert error_facts(str(e)) and ("buffer xe " in str(e) or "buffer ye " in str(e)), str(e)


def test_generator_reaches_every_construct():
    cov = Coverage()
    # 800: unsteered, the rare shapes come by chance (a steered campaign makes them on purpose,
    # test_gen_shapes.py); group:unordered first came at program 400 once guard:loaded shifted
    # the draws (within 250 before), at 739 once store:either-side did (the generator's latest shape;
    # everything else within 150). About 23 s for the 800.
    for case in collect(800):
        cov.program(case)
    r = cov.report()
    static_gaps = [g for g in r["gaps"] if not g.startswith(("access:", "effect:"))]
    assert not static_gaps, static_gaps
    for n in (1, 31, 33, 257):
        assert r["launch"].get(f"n={n}"), n
    for b in (8, 16, 32):
        assert r["launch"].get(f"block={b}"), b


def test_inputs_are_seeded_stable_and_special():
    spec = BufferSpec("x", DType.F32, 4000, "data")
    a, b = fill(spec, 7, 1), fill(spec, 7, 1)
    assert a.tobytes() == b.tobytes() and a.tobytes() != fill(spec, 8, 1).tobytes()
    bits = a.view(np.uint32)
    assert np.isnan(a).any() and np.isposinf(a).any() and np.isneginf(a).any()
    assert (bits == 0x80000000).any() and (bits == 0).any()
    assert ((a != 0) & (np.abs(a) < 1.17549435e-38)).any()            # subnormals
    assert (np.abs(a[np.isfinite(a)]) > 1e30).any()                   # huge
    fin = fill(BufferSpec("x", DType.F32, 4000, "finite"), 7, 1)
    assert np.isfinite(fin).all()
    perm = fill(BufferSpec("p", DType.I32, 97, "perm"), 3, 2)
    assert sorted(perm.tolist()) == list(range(97))
    # the same bytes in every process and NumPy version (a fixed integer hash, not np.random)
    import hashlib
    digest = hashlib.sha256(fill(BufferSpec("x", DType.F32, 64, "data"), 12345, 1).tobytes()).hexdigest()
    assert digest == GOLDEN_FILL, digest


GOLDEN_FILL = "6d65020d3f15e5f3495ae6d7c046e8227cf4fb74b47add758be6c52a40bd09b5"


def test_variant_matrix():
    assert len(KNOB_MATRIX) == 25 and KNOB_MATRIX[0] == "whole"
    assert any("workers=" in v for v in DEFAULT_VARIANTS)    # every bug below is in reach (pool_partial_task)
    for case in collect(12, 3):
        vs = variants_for(case)
        assert vs[0] == "whole" and len(set(vs)) == len(vs)
        parsed = [parse_variant(v) for v in vs]
        assert len(set(parsed)) == len(parsed)
        assert all(v.lanes <= case.block for v in parsed)
        has_private = any(type(s).__name__ == "Private" for s in case.kernel.body)
        assert any(v.private == "thread" for v in parsed) == has_private
        assert {v.lanes for v in parsed} == {l for l in (1, 4, 8, 16) if l <= case.block}
        for v in parsed:       # pinned interleaves fit the block
            assert v.interleave == "auto" or v.lanes * v.interleave <= case.block
        nblocks = -(-case.n // case.block)
        for v in parsed:       # a pool variant is one whose launch really is several tasks
            if v.workers > 1:
                grain = {"legacy": -(-nblocks // v.workers), 0: -(-nblocks // (4 * v.workers))}.get(v.grain, v.grain)
                assert 1 <= grain < nblocks, (v, nblocks)


@kernel(block=8)
def _by_block(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[g] * 2.0 + 1.0


def _hand_case(k, n: int) -> Case:
    return Case(k.ir, n, {}, tuple(BufferSpec(p.name, p.dtype, 80, "data") for p in k.ir.params), {}, 5)


def test_matrix_breadth_for_a_case():
    """Every knob value the backend offers for exact variants appears where the case allows it:
    the pool (three worker counts, several grains, one leaving a partial last task), checked=on,
    unsafe=on and an interleave strictly between one packet and the whole cohort (issue 17)."""
    case = collect(1, 0, blocks=(64,), sizes=(257,))[0]          # 5 blocks of 64
    parsed = [parse_variant(v) for v in variants_for(case)]
    pool = [v for v in parsed if v.workers > 1]
    assert {v.workers for v in pool} == {2, 3, 4} and len({v.grain for v in pool}) >= 3
    assert any(isinstance(v.grain, int) and v.grain > 1 and 5 % v.grain for v in pool)   # a partial last task
    assert any(v.checked for v in parsed) and any(v.unsafe for v in parsed)
    inter = {(v.lanes, v.interleave) for v in parsed if v.interleave != "auto"}
    assert any(1 < i < 64 // lanes for lanes, i in inter), inter
    assert (16, 2) in inter                                        # a block of 64: 16 lanes, 2 packets
    # one block of 8: no pool (one task on the caller), no in-between interleave for 4 lanes
    small = [parse_variant(v) for v in variants_for(_hand_case(_by_block, 8))]
    assert all(v.workers == 1 and v.grain == "caller" for v in small)
    assert all(v.interleave in ("auto", 1, 2) for v in small) and any(v.checked for v in small)


def test_a_pool_variant_of_the_matrix_catches_a_lost_task():
    """The matrix's pool variants launch on the worker pool (CompiledKernel.launch) and are
    checked bit for bit between guard bands: the pool losing its partial last task
    (inject pool_partial_task) is a mismatch; without the bug the same runs agree."""
    case = _hand_case(_by_block, 37)             # 5 blocks of 8
    pool = [v for v in variants_for(case) if "workers=" in v]
    assert len(pool) >= 2
    clean = execute(case, pool)["variants"]
    assert all(r["status"] == "ok" and r["pool"]["tasks"] > 1 for r in clean.values()), clean
    assert any(r["pool"]["partial_last_task"] for r in clean.values())
    with inject_bug_TESTING_ONLY("pool_partial_task"):
        bad = execute(case, pool)["variants"]
    lost = [v for v, r in bad.items() if r["status"] == "mismatch"]
    assert lost == [v for v, r in clean.items() if r["pool"]["partial_last_task"]], bad
    assert all("y[" in bad[v]["detail"] for v in lost)


# ---------------------------------------------------------------- campaigns

def test_clean_campaign_finds_no_mismatch():
    r = run_campaign(BACKSTOP_SECONDS, seed=2024, jobs=2, shrink=False, max_programs=CLEAN_PROGRAMS)
    detail = "\n\n".join(f"{f['kind']} on {f['variant']}: {f['description']}\n{f['kernel']}"
                         for f in r["failures"])
    assert r["mismatches"] == 0 and not r["failures"], detail
    assert r["programs"] == CLEAN_PROGRAMS and r["programs_cut_by_time_box"] == 0, r
    assert r["discard_rate"] <= 0.05, r["discard_reasons"]
    assert r["worker_crashes"] == 0
    assert r["variant_runs"] >= 3 * r["programs"]       # whole and 3 drawn variants (minus unsupported)
    cov = r["coverage"]
    for key in ("load:uniform", "load:contiguous", "load:gather", "store:contiguous", "store:scatter"):
        assert cov["access_modes"].get(key), (key, cov["access_modes"])
    for key in ("unmasked", "masked", "per-lane"):
        assert cov["effect_modes"].get(key), (key, cov["effect_modes"])
    print(json.dumps({k: v for k, v in r.items() if k not in ("coverage", "variants")}))
    print("coverage gaps:", cov["gaps"])


# A fixed seed and a bound on programs make each of these deterministic; see the
# mutation table (python -m cohort.verify.fuzz --mutations) for times and minimal kernels.
BUG_SEED = 0
BUG_PROGRAMS = 40


# Issue 17's bugs take a campaign of several to a few dozen programs (tests/test_gen.py shows
# each is live on a small kernel in the default suite; gen_mutants.py estimates the rates).
SLOW_BUGS = {"rem_pow2_mask", "div_pow2_shift", "ne_ordered", "le_unordered", "loop_stride_unit",
             "pool_partial_task", "sum_identity_sign", "packet_tree_operands", "prefix_loop_stride",
             "group_readback"}


def _bug_param(b: str):
    # With the broader generator (blocks to 128, more statements per program) a campaign per
    # bug takes minutes, so the whole mutation check runs under -m slow; the default suite
    # keeps the shrink test below (tree_order) and tests/test_gen.py's per-bug small kernels.
    return pytest.param(b, marks=[pytest.mark.slow])


# A read past a buffer's end changes no output and no guard band (they catch stray writes):
# tests/test_no_overread.py catches these plants with a PROT_NONE page after the buffer instead.
NOT_SEEN_BY_OUTPUTS = {"span_overread", "masked_load_all_on_any"}
# Launches go to an OpenMP team only in a process that has loaded an OpenMP runtime (torch
# does; fuzz workers do not): tests/test_pool_openmp.py catches openmp_publish_late in such a
# process. A one-sided guard on a loaded index shows only on an index past the open side, an
# error the generator cannot make one fact (several threads, in any order: gen/index.py
# guard_probe): tests/test_plants28.py catches bounds_clamp_one_side with a kernel of its own.
NOT_ON_FUZZ_PATHS = {"openmp_publish_late", "bounds_clamp_one_side"}
# The tile lowering's plants are cohort.triton's, off the thread family's paths: the tile family's
# campaigns catch them (tests/test_fuzz_tiles.py).
NOT_ON_FUZZ_PATHS |= {b for b in BUGS if b.startswith("triton_")}


@pytest.mark.parametrize("bug", [_bug_param(b) for b in sorted(set(BUGS) - NOT_SEEN_BY_OUTPUTS - NOT_ON_FUZZ_PATHS)])
def test_injected_bug_is_caught(bug):
    r = run_campaign(BACKSTOP_SECONDS, seed=BUG_SEED, jobs=2, bugs=(bug,), stop_on_failure=True, shrink=False,
                     max_programs=BUG_PROGRAMS)
    assert r["failures"], f"{bug} not caught in {r['programs']} programs ({r['seconds']} s)"
    f = r["failures"][0]
    assert f["kind"] in ("mismatch", "annotation", "guard", "native_error", "crash")
    assert r["injected_bugs"] == [bug]
    print(f"{bug}: caught after {f['found_after_seconds']} s, program {r['programs']}: {f['kind']} on "
          f"{f['variant']}: {f['description'][:200]}")


def test_generator_finds_the_nested_minmax_fold():
    """Issue 29: the miscompile went unseen because the generator almost never nested a
    min/max sharing an operand, with NaN or a zero there in some lanes. Now the first
    programs of a fixed seed find it on the scalar build alone (deterministic under pytest:
    programs 74 and 79 of these since the cooperative pieces joined the mix; a plain script
    drawing the same seeds found 13, 39, 40, 41 and 74)."""
    cases = collect(80, 100)
    assert any(b.fill == "nanzero" for c in cases for b in c.buffers)
    with inject_bug_TESTING_ONLY("minmax_unfenced"):
        caught = [i for i, c in enumerate(cases)
                  if any(v["status"] != "ok" for v in execute(c, ["whole"])["variants"].values())]
    assert caught, "no program of 80 shows min(min(s, b), s) folded"


def test_failure_shrinks_to_a_replayable_case(tmp_path):
    bug = "tree_order"
    r = run_campaign(BACKSTOP_SECONDS, seed=BUG_SEED, jobs=2, bugs=(bug,), stop_on_failure=True,
                     shrink=True, shrink_seconds=25, corpus_dir=str(tmp_path), max_programs=BUG_PROGRAMS)
    assert r["failures"], r
    f = r["failures"][0]
    print(f"{bug}: {f['statements_before']} -> {f['statements_after']} statements in {f['shrink_steps']} steps, "
          f"{f['shrink_seconds']} s\n{f['kernel']}")
    assert f["shrunk"] and f["statements_after"] <= f["statements_before"]
    assert "def fz(" in f["kernel"] and "block_" in f["kernel"]
    path = f["case_file"]
    assert os.path.dirname(path) == str(tmp_path)
    case, doc = corpus.load_case(path)
    assert f["inputs_seed"] == case.seed and doc["expected"] == "agree" and doc["variants"]
    # the case is the bug: it fails with the bug injected and passes without it
    with inject_bug_TESTING_ONLY(bug):
        bad = corpus.replay(doc)
    assert any(v["status"] == f["kind"] for v in bad["variants"].values())
    good = corpus.replay(doc)
    assert all(v["status"] in ("ok", "unsupported") for v in good["variants"].values())


def test_a_crashing_compile_is_reported_and_survived(monkeypatch):
    case = collect(1, 5)[0]
    vs = variants_for(case)[:3]
    monkeypatch.setenv("COHORT_FUZZ_TEST_CRASH", vs[1])   # the worker aborts compiling this one
    pool = WorkerPool(jobs=1)
    try:
        res = pool.run(case, vs)
    finally:
        pool.close()
    assert res["variants"][vs[1]]["status"] == "crash"
    assert "signal" in res["variants"][vs[1]]["detail"]
    assert res["variants"][vs[0]]["status"] == "ok" and res["variants"][vs[2]]["status"] == "ok"
    assert pool.crashes == 1


def test_in_process_execution_matches_workers():
    case = collect(1, 9)[0]
    vs = variants_for(case)[:2]
    a = execute(case, vs)
    pool = WorkerPool(jobs=1)
    try:
        b = pool.run(case, vs)
    finally:
        pool.close()
    assert a["reference_checksum"] == b["reference_checksum"]
    assert [r.get("checksum") for r in a["variants"].values()] == [r.get("checksum") for r in b["variants"].values()]


def test_programs_queued_back_to_back_get_their_own_results():
    """The campaign queues the next program while one runs (WorkerPool.submit): each program's
    results are its own, in its variants' order, as if it had run alone in this process."""
    runs = [(c, variants_for(c)[:3]) for c in collect(6, 11)]
    runs = [(c, vs, r) for c, vs in runs for r in [execute(c, vs)] if not r["discard"]][:2]
    cases, vss, alone = zip(*runs)
    pool = WorkerPool(jobs=2)
    try:
        pending = [pool.submit(c, vs) for c, vs in zip(cases, vss)]
        queued = [p.result() for p in pending]
    finally:
        pool.close()
    for a, b, vs in zip(alone, queued, vss):
        assert list(b["variants"]) == vs
        assert a["reference_checksum"] == b["reference_checksum"]
        assert [r.get("checksum") for r in a["variants"].values()] == [r.get("checksum") for r in b["variants"].values()]


def test_cli_fuzz_json(tmp_path):
    p = subprocess.run([sys.executable, "-m", "cohort.cli", "fuzz", "--programs", "2", "--seconds", "3000",
                        "--seed", "1", "--jobs", "1", "--json", "--corpus", str(tmp_path)],
                       capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["programs"] == 2
    for key in ("programs", "variant_runs", "mismatches", "failures", "seconds", "coverage", "discard_rate"):
        assert key in r
    assert r["mismatches"] == 0 and r["failures"] == []
    assert set(r["coverage"]) >= {"ops", "statements", "access_modes", "effect_modes", "gaps"}


@pytest.mark.parametrize("argv,msg", [(["--inject", "nonsense"], "unknown bug"),
                                      (["--seconds", "abc"], "--seconds takes a number"),
                                      (["--seconds", "-1"], "--seconds must be")])
def test_cli_fuzz_bad_usage(argv, msg):
    p = subprocess.run([sys.executable, "-m", "cohort.cli", "fuzz", *argv], capture_output=True, text=True)
    assert p.returncode == 2 and msg in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_long_campaign_finds_no_mismatch():
    r = run_campaign(knobs.FUZZ_LONG_SECONDS.get(), seed=7, jobs=2, shrink=True)
    detail = "\n\n".join(f"{f['kind']} on {f['variant']}: {f['description']}\n{f['kernel']}"
                         for f in r["failures"])
    assert not r["failures"], detail
    assert r["discard_rate"] <= 0.05
    print(json.dumps({k: v for k, v in r.items() if k not in ("variants",)}))
