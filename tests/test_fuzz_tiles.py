"""The fuzzer's tile-program family (`cohort fuzz --family tiles`, docs/fuzzing.md): the generator
is deterministic, its programs agree reference vs native on the clean build, and a short
campaign over a fixed range of programs finds every planted bug of the tile lowering
(backend/inject.py, `triton_*`) while the clean build finds nothing there."""
import json
import linecache
import platform

import numpy as np
import pytest

pytest.importorskip("triton")

from cohort.backend.inject import BUGS  # noqa: E402
from cohort.cli import main  # noqa: E402
from cohort.verify.fuzz.tile_campaign import replay, run_tile_campaign  # noqa: E402
from cohort.verify.fuzz.tiles import Mismatch, check  # noqa: E402
from cohort.verify.gen.tiles import KINDS, TileProgram, generate  # noqa: E402

TILE_PLANTS = sorted(b for b in BUGS if b.startswith("triton_"))
# programs 0..RANGE-1 of campaign seed 0: every plant is caught inside it (on an AVX-512 host the
# first catches are programs 0 to 6, docs/fuzzing.md), and the clean build must agree on all of it
RANGE = 10


def test_the_generator_is_deterministic_per_seed():
    for seed in (0, 5, 123456):
        a, b = generate(seed, index=seed), generate(seed, index=seed)
        assert a == b and a.source() == b.source()
    assert generate(1, index=1).source() != generate(2, index=1).source()


def test_every_piece_kind_is_made_in_turn():
    made = {p.kind for i in range(len(KINDS)) for p in generate(i, index=i).pieces}
    assert made == set(KINDS)


def test_a_program_round_trips_through_json():
    p = generate(7, index=7)
    assert TileProgram.from_json(json.loads(json.dumps(p.to_json()))) == p


def test_clean_build_finds_nothing_on_the_plants_range():
    r = run_tile_campaign(600, 0, max_programs=RANGE, shrink=False)
    assert r["programs"] == RANGE
    assert r["failures"] == [], r["failures"]
    assert r["counts"].get("discarded", 0) == 0 and r["counts"].get("rejected", 0) == 0
    assert all(r["piece_kinds"][k] for k in KINDS[:RANGE])          # each forced once in the range


@pytest.mark.parametrize("bug", TILE_PLANTS)
def test_each_plant_is_caught_by_a_short_campaign(bug):
    r = run_tile_campaign(600, 0, max_programs=RANGE, bugs=(bug,), shrink=False, stop_on_failure=True)
    assert r["failures"], f"{bug} not caught in programs 0..{RANGE - 1}"
    assert r["failures"][0]["status"] == "mismatch"


def test_a_finding_is_shrunk_kept_and_replayed(tmp_path):
    r = run_tile_campaign(600, 0, max_programs=RANGE, bugs=("triton_idiv_floor",), corpus_dir=str(tmp_path),
                          stop_on_failure=True)
    f = r["failures"][0]
    assert len(f["minimal_pieces"]) == 1
    assert replay(f["case_file"])["agree"] is False
    case = json.loads(open(f["case_file"]).read())
    case["bugs"] = []                                   # the same case without the plant agrees
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(case))
    assert replay(str(clean))["agree"] is True


def test_cli_one_line_per_finding_exit_1(capsys):
    assert main(["fuzz", "--family", "tiles", "--jobs", "0", "--programs", "1", "--no-shrink",
                 "--inject", "triton_masked_store_whole"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("tiles MISMATCH bin=") for line in out) == 1
    assert main(["fuzz", "--family", "tiles", "--jobs", "0", "--programs", "1"]) == 0


@pytest.mark.parametrize("argv, msg", [
    (["--steer", "on"], "does not take --steer"),
    (["--inject", "tree_order"], "not a plant of the tile lowering"),
    (["--inject", "nope"], "unknown bug"),
    (["--jobs", "-1"], "--jobs"),
])
def test_cli_bad_input_is_exit_2(argv, msg, capsys):
    assert main(["fuzz", "--family", "tiles", "--programs", "1", *argv]) == 2
    assert msg in capsys.readouterr().err


def test_strict_nan_off_for_the_thread_family(capsys):
    assert main(["fuzz", "--strict-nan", "--programs", "1"]) == 2


# ---------------------------------------------------------------- findings of this family, not fixed here

def _kernel(src: str, name: str):
    fname = f"<{name}>"
    linecache.cache[fname] = (len(src), None, src.splitlines(True), fname)
    g = {}
    exec(compile(src, fname, "exec"), g)
    return g["k"]


_DOT_OF_A_COMPUTED_TILE = '''
import triton
import triton.language as tl

@triton.jit
def k(x, out, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(x + rm[:, None] * BK + rk[None, :])
    b = tl.load(x + rk[:, None] * BN + rn[None, :])
    a = a + 0.0
    tl.store(out + rm[:, None] * BN + rn[None, :], tl.dot(a, b))
'''


def test_found_dot_of_a_recomputed_variable():
    # found by this family: a dot operand that is a variable native recomputes at its uses (a
    # cheap pure value) was read from that variable's array, never written (NaN or garbage);
    # fixed in native_tiles (tests/test_triton_native_fast.py has its own case)
    from cohort.triton import launch, native
    from cohort.triton.interp import Buffer
    from cohort.triton.tir import TT, Dt, Ptr
    prog = launch.build(_kernel(_DOT_OF_A_COMPUTED_TILE, "dot-inline"),
                        [("x", TT(Ptr(Dt.F32))), ("out", TT(Ptr(Dt.F32)))], [("BM", 2), ("BN", 8), ("BK", 16)])
    bufs = {"x": Buffer(np.arange(1, 200, dtype=np.float32), 0, Dt.F32),
            "out": Buffer(np.zeros(16, np.float32), 0, Dt.F32)}
    native.run_check(prog, bufs, {}, (1, 1, 1))


_DOT_NAN = '''
import triton
import triton.language as tl

@triton.jit
def k(x, y, z, out):
    r = tl.arange(0, 16)
    i = r[:, None] * 16 + r[None, :]
    tl.store(out + i, tl.dot(tl.load(x + i), tl.load(y + i), tl.load(z + i)))
'''


def test_found_dot_nan_sign():
    # found by this family: where NaNs of both signs meet in tl.dot's fma chain, native keeps
    # the other sign than the reference on x86-64; check mode counts every NaN equal (DESIGN §3)
    from cohort.triton import launch, native
    from cohort.triton.interp import Buffer
    from cohort.triton.tir import TT, Dt, Ptr
    prog = launch.build(_kernel(_DOT_NAN, "dot-nan"), [(n, TT(Ptr(Dt.F32))) for n in ("x", "y", "z", "out")], [])
    rng = np.random.default_rng(0)
    vals = np.array([np.nan, -np.nan, np.inf, -np.inf, 0, 1, -2, 1e30], np.float32)
    x, y, z = (rng.choice(vals, 256).astype(np.float32) for _ in range(3))
    bufs = {n: Buffer(a, 0, Dt.F32) for n, a in dict(x=x, y=y, z=z, out=np.zeros(256, np.float32)).items()}
    native.run_check(prog, bufs, {}, (1, 1, 1))


@pytest.mark.slow
def test_clean_campaign_of_150_programs():
    r = run_tile_campaign(3600, 1, max_programs=150, jobs=0)
    assert r["failures"] == [] and r["counts"].get("discarded", 0) == 0


@pytest.mark.slow
@pytest.mark.parametrize("bug", TILE_PLANTS)
def test_each_plant_is_caught_from_another_campaign_seed(bug):
    r = run_tile_campaign(600, 1, max_programs=40, bugs=(bug,), shrink=False, stop_on_failure=True)
    assert r["failures"], f"{bug} not caught in campaign 1's first 40 programs"


def test_mismatch_bins_name_the_piece_kind():
    from cohort.backend.inject import inject_bug_TESTING_ONLY
    prog = generate(1, index=1)
    with inject_bug_TESTING_ONLY("triton_stride_as_contiguous"):
        m = check(prog)
    writers = {o.name: p.kind for p in prog.pieces for o in p.outs}
    assert isinstance(m, Mismatch) and m.kind == writers[m.buffer] == "strided" and m.bin == "strided:bits"


def test_without_triton_the_family_says_it_needs_the_extra(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "triton", None)       # import triton raises ImportError
    assert main(["fuzz", "--family", "tiles", "--programs", "1", "--jobs", "0"]) == 2
    assert "needs the `triton` extra" in capsys.readouterr().err


def test_an_internal_error_is_a_finding_not_a_traceback(monkeypatch):
    import cohort.verify.fuzz.tiles as tiles

    def broken(prog, strict_nan=False):
        raise RuntimeError("LLVM verifier: planted for this test")
    monkeypatch.setattr(tiles, "check", broken)
    r = run_tile_campaign(600, 0, max_programs=2, shrink=False)
    assert r["counts"] == {"error": 2}
    assert [f["bin"] for f in r["failures"]] == ["program:internal-error"]
    assert "planted for this test" in r["failures"][0]["detail"]


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="an AVX2 build runs on x86-64 hosts")
@pytest.mark.parametrize("bug", [None] + TILE_PLANTS)
def test_the_plants_range_on_an_avx2_build(bug):
    """8 lanes instead of the host's: the same programs, the same verdicts (measured on an
    AVX-512 host: each plant caught at the same program as with 16 lanes)."""
    from cohort.backend import target
    from cohort.backend.inject import inject_bug_TESTING_ONLY
    avx2 = target.from_triple("x86_64-unknown-linux-gnu", cpu="haswell", features="+avx2,+fma,+f16c")
    with target.use(avx2), inject_bug_TESTING_ONLY(*([bug] if bug else [])):
        found = [check(generate(i, index=i)) for i in range(RANGE)]
    mismatches = [m for m in found if isinstance(m, Mismatch)]
    assert bool(mismatches) == (bug is not None)
