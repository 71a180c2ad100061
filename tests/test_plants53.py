"""Issue 53: planted bugs on the paths a campaign reached rarely or on some hosts only - f32
atomic min/max fed NaN and both zeros, shared-array atomics with lanes off, and the two sides
of the target-dependent lowering switches (the per-register masked-store dispatch, the
software fma). Each changes what a small kernel does, through the fuzzer's own comparison
(`execute`), while the clean build agrees; the switch plants only under their switch, as a
campaign draws it (execute.lowering_switches)."""
from __future__ import annotations

import pytest

from cohort import (
    NAN,
    Buffer,
    atomic_max,
    atomic_min,
    barrier,
    block_id,
    f32,
    fma,
    global_id,
    kernel,
    private,
    shared,
    thread_id,
)
from cohort.backend.inject import BUGS, inject_bug_TESTING_ONLY
from cohort.verify.execute import SWITCHES, error_facts, execute, lowering_switches, reference
from cohort.verify.gen import BufferSpec, Case

N = 37          # 4 whole blocks of 8 and a partial one of 5 threads
P4 = "lanes=4,full_packet=on,predicated=on,private=cohort"
P8 = "lanes=8,full_packet=on,predicated=on,private=thread"


@kernel(block=8)
def _f32_atomic_edges(x: Buffer[f32], ya: Buffer[f32]):
    t = thread_id()
    g = global_id()
    v = 0.0                        # +0 then -0 on each element: min keeps -0, max +0 (DESIGN §3)
    if t % 2 == 1:
        v = -0.0
    if t == 5:
        v = NAN                    # a NaN update: the element becomes NaN
    atomic_min(ya, (g // 2) % 8, v)     # threads 2k and 2k + 1 on one element
    atomic_max(ya, 8 + (g // 2) % 8, -v)
    atomic_min(ya, 16 + g % 4, x[g])


@kernel(block=8)
def _shared_lanes_off(x: Buffer[f32], y: Buffer[f32]):
    s = shared(f32, 2)
    t = thread_id()
    if t == 0:
        s[0] = -0.0
        s[1] = 0.0
    barrier()
    if t % 3 == 1:                 # lanes off in every packet
        atomic_max(s, 1, x[global_id()])
    barrier()
    if t == 0:
        y[2 * block_id()] = s[0]
        y[2 * block_id() + 1] = s[1]


@kernel(block=8)
def _masked_lanes(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    if g % 4 != 0:                 # the first lane of every 4-lane register off, the others on
        y[g] = x[g] * 2.0


@kernel(block=8)
def _fused(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = fma(x[g], x[g + 1] + 0.5, x[g + 2])


@kernel(block=8)
def _group_shifted(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[(g + 1) * 2 + -1] = x[g]             # slots at 2g + 1 and 2g + 2: a negative constant, then none
    y[(g + 1) * 2] = x[g] + 1.0


@kernel(block=8)
def _not_flip_guard(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    i = g
    if not (20 < i):
        y[g] = x[i + 2]                    # x has 22 elements: thread 20 reads x[22], one past


@kernel(block=8)
def _const_var_loop(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    n = 9                                  # a constant reached through a top-level variable
    w = 0.0
    for j in range(1, n, 3):               # j = 1, 4, 7
        w = w + x[j + g % 4]
    y[g] = w


@kernel(block=8)
def _prefix(x: Buffer[f32], y: Buffer[f32]):
    t = thread_id()
    w = 0.0
    for j in range(2 * t + 1, 12, 3):      # lane t leaves after (11 - 2t) // 3 + 1 trips: a prefix split
        w = w + x[j]
    y[global_id()] = w


@kernel(block=8)
def _private_masked(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    p = private(f32, 3)
    p[1] = x[g]
    if g % 3 == 0:                         # lanes off inside every packet
        p[1] = x[g] * 2.0                  # a uniform index: the lanes' elements side by side (cohort)
    y[g] = p[1]


@kernel(block=8)
def _either_side(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    if g % 3 == 0:                         # each side's value its own per lane
        y[g] = f32(g * 3 + 1) * 0.5
    else:
        y[g] = f32(g * -7 + 2) * 1.25


# bug: (kernel, buffer lengths, variants, switches the plant needs)
PLANTS = {
    "atomic_f32_nan_old": (_f32_atomic_edges, {"ya": 20}, ("whole", P4), {}),
    "atomic_f32_zero_equal": (_f32_atomic_edges, {"ya": 20}, ("whole", P4), {}),
    "shared_atomic_spare_update": (_shared_lanes_off, {"y": 10}, ("whole", P4, P8), {}),
    "masked_store_dispatch_first_lane": (_masked_lanes, {}, (P4, P8), {"COHORT_MASKED_STORE": "dispatch"}),
    "group_base_unshifted": (_group_shifted, {"y": 2 * 40 + 2}, (P4, P8), {}),
    "const_trips_unit_step": (_const_var_loop, {}, ("whole", P4), {}),
    "prefix_lanes_floor": (_prefix, {}, (P4, P8), {}),
    "private_store_unmasked": (_private_masked, {}, (P4, "lanes=8,full_packet=off,predicated=on,private=cohort"),
                               {}),
    "fma_software_order": (_fused, {}, ("whole", P4), {"COHORT_FMA": "software"}),
}


def _case(k, lengths: dict) -> Case:
    specs = tuple(BufferSpec(p.name, p.dtype, lengths.get(p.name, 40), "finite") for p in k.ir.params)
    return Case(k.ir, N, {}, specs, {}, 7)


def test_every_issue53_plant_is_a_known_bug():
    assert set(PLANTS) <= set(BUGS)


@pytest.mark.parametrize("bug", sorted(PLANTS))
def test_issue53_plant_changes_a_small_kernel(bug, monkeypatch):
    k, lengths, variants, switches = PLANTS[bug]
    for env, value in switches.items():
        monkeypatch.setenv(env, value)
    case = _case(k, lengths)
    clean = execute(case, list(variants), full=True)
    assert all(r["status"] == "ok" for r in clean["variants"].values()), clean
    with inject_bug_TESTING_ONLY(bug):
        bad = execute(case, list(variants), full=True)
    assert any(r["status"] in ("mismatch", "annotation", "native_error", "guard")
               for r in bad["variants"].values()), bad
    for env, value in switches.items():      # the other side of the switch does not take the path
        other = next(v for e, vs in SWITCHES if e == env for v in vs if v != value)
        monkeypatch.setenv(env, other)
        with inject_bug_TESTING_ONLY(bug):
            same = execute(case, list(variants), full=True)
        assert all(r["status"] == "ok" for r in same["variants"].values()), same


def test_bounds_not_flip_plant_passes_a_one_past_guard():
    """An expected-error program: every checking build must report the interpreter's error; with
    the plant the proof passes `not (20 < i)` as i <= 19 and the unchecked body runs past."""
    assert "bounds_not_flip" in BUGS
    case = _case(_not_flip_guard, {"x": 22})
    ref, why = reference(case)
    assert ref is None and error_facts(why[1]) is not None, why
    variants = ["whole", P4]
    clean = execute(case, variants, full=True)
    assert clean.get("expected_error") and all(r["status"] == "ok" for r in clean["variants"].values()), clean
    with inject_bug_TESTING_ONLY("bounds_not_flip"):
        bad = execute(case, variants, full=True)
    assert any(r["status"] == "error_mismatch" for r in bad["variants"].values()), bad


def test_a_campaign_draws_every_lowering_switch_both_ways(monkeypatch):
    """Per program, from its key (as its compile level): over a few programs every switch takes
    both values on any host; a switch the environment sets stands."""
    from cohort.verify.gen import generate
    for env, _ in SWITCHES:
        monkeypatch.delenv(env, raising=False)
    seen = {env: set() for env, _ in SWITCHES}
    for s in range(16):
        for env, value in lowering_switches(generate(s)).items():
            seen[env].add(value)
    assert all(seen[env] == set(values) for env, values in SWITCHES), seen
    monkeypatch.setenv("COHORT_FMA", "software")
    assert "COHORT_FMA" not in lowering_switches(generate(0))


def test_a_failing_record_names_its_switches():
    case = _case(_fused, {})
    with inject_bug_TESTING_ONLY("fma_software_order", "fma_operand_order"):
        res = execute(case, ["whole"])
    rec = res["variants"]["whole"]
    assert rec["status"] == "mismatch" and set(rec["switches"]) == {env for env, _ in SWITCHES}
    assert f"COHORT_FMA={rec['switches']['COHORT_FMA']}" in rec["detail"]


# the lowering path each probe shape is steered to (gen/steer.PATHS): a kernel that takes it
PATH_KERNELS = {
    "either_side_stores": (_either_side, {}, P4, {}),
    "interleaved_offset_stores": (_group_shifted, {"y": 2 * 40 + 2}, P4, {}),
    "prefix_loops": (_prefix, {}, P4, {}),
    "constant_trips_var": (_const_var_loop, {}, "whole", {}),
    "private_masked_side_by_side": (_private_masked, {}, P4, {}),
    "f32_atomic_minmax": (_f32_atomic_edges, {"ya": 20}, "whole", {}),
    "shared_atomic_masked": (_shared_lanes_off, {"y": 10}, P4, {}),
    "masked_store_dispatch": (_masked_lanes, {}, P4, {"COHORT_MASKED_STORE": "dispatch"}),
}


@pytest.mark.parametrize("path", sorted(PATH_KERNELS))
def test_the_lowering_counts_each_steered_path(path, monkeypatch):
    """The steering keeps a probe shape aimed at until variant runs took its path (steer.PATHS),
    read from the lowering's counts: each count is made where its path is taken, and reaches
    the fuzzer's variant record (`lowering`), so a renamed or lost count fails here, not
    silently in a campaign's steering."""
    from cohort.verify.gen.steer import PATHS
    assert {p for ps in PATHS.values() for p in ((ps,) if isinstance(ps, str) else ps)} <= set(PATH_KERNELS)
    k, lengths, variant, switches = PATH_KERNELS[path]
    for env, value in switches.items():
        monkeypatch.setenv(env, value)
    rec = execute(_case(k, lengths), [variant], full=True)["variants"][variant]
    assert rec["status"] == "ok" and rec["lowering"].get(path, 0) >= 1, rec
    for env, value in switches.items():      # the other side of the switch, for a kernel without the path
        monkeypatch.setenv(env, next(v for e, vs in SWITCHES if e == env for v in vs if v != value))
    other = execute(_case(_fused, {}), [variant], full=True)["variants"][variant]
    assert path not in other["lowering"], other
