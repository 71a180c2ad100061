"""The stress check (fuzz/stress.py): a program with integer atomics on global buffers also
runs a stress program, a large launch on two pool workers compared bit for bit with its
single-thread launch; the campaign lists it as a variant run of its own."""
from __future__ import annotations

import pytest

from cohort.verify.fuzz import stress
from cohort.verify.fuzz.stress import STRESS, STRESS_THREADS, needs_stress, run_stress, stress_case
from cohort.verify.fuzz.tally import checksum_bins
from cohort.verify.fuzz.workers import InProcess
from cohort.verify.gen import generate


def _atomic_program():
    return next(c for c in (generate(s) for s in range(120)) if needs_stress(c))   # seed 40 with today's draws


def test_a_stress_program_is_large_agrees_with_itself_and_is_not_a_checksum_bin(monkeypatch):
    case = _atomic_program()
    sc = stress_case(case)
    assert sc.n == STRESS_THREADS and needs_stress(sc)
    assert str(stress_case(case).kernel) == str(sc.kernel)          # the same in every process
    monkeypatch.setattr(stress, "STRESS_THREADS", 1 << 16)            # (the default suite's time)
    res = InProcess().run(case, ["whole", STRESS])
    rec = res["variants"][STRESS]
    assert rec["status"] == "ok" and "skipped" not in rec and len(rec["stress"]["pool"]) >= 1
    assert all(STRESS not in vs for vs in checksum_bins(res).values()) and len(checksum_bins(res)) == 1


@pytest.mark.slow
def test_the_stress_check_sees_a_plain_atomic_lose_updates():
    """atomic_plain loses updates only when two pool workers really run at once: over several
    stress programs (8 pool launches each) at least one differs (5 of 10 on a busy machine)."""
    from cohort.backend.inject import inject_bug_TESTING_ONLY
    cases = [c for c in (generate(s) for s in range(120)) if needs_stress(c)][:8]
    with inject_bug_TESTING_ONLY("atomic_plain"):
        recs = [run_stress(c) for c in cases]
    assert any(r["status"] == "mismatch" for r in recs), recs
