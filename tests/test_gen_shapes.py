"""Rare shapes (gen/steer.SHAPES): the generator makes each one on purpose while a campaign's
steering misses it, records it in `case.shapes`, and the rotation gives programs whose blocks
are not idempotent a pool variant that cuts the whole-block body into several tasks."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from cohort import Buffer, f32, global_id, kernel
from cohort.verify.fuzz import Coverage
from cohort.verify.fuzz.rotation import draw_variants
from cohort.verify.gen import BufferSpec, Case, Steering, generate
from cohort.verify.gen.steer import FORM_TIMES, PATH_TIMES, PATHS, SHAPE_CAP, SHAPE_FORMS, SHAPE_TIMES_BY, SHAPES
from cohort.verify.matrix import rerun_sensitive, variants_for


@pytest.mark.parametrize("offset", [0, 1000, 2000, 3000, 5000, 9000])
def test_a_steered_campaign_makes_every_rare_shape_early(offset):
    """As a local steered campaign does: the steering refreshed from the coverage every 3 programs;
    every rare shape within the first 30 programs of each of several draw sequences
    (generate(offset + s)): 14 to 25 programs on ten offsets. The eight one-past shapes need eight
    one-past programs: they are half of the programs while one is missing (build.AIM_PAST_PERCENT;
    at 30% two to four were still missing after 30 programs on five of six offsets). A program aims
    at one non-past shape (all at once made programs of 30-50 statements) and one small probe
    besides (build.PROBE_SHAPES), and a shape never made comes before one made once (base.Core.aim;
    without it one shape of 17 was left on two of ten offsets)."""
    cov, first = Coverage(), {}
    for s in range(30):
        if s % 3 == 0:
            steer = Steering.from_report(cov.report())
        case = generate(offset + s, steer)
        cov.program(case)
        for shape in case.shapes:
            first.setdefault(shape, s)
    assert {s for s in first if s in SHAPES} == set(SHAPES), sorted(set(SHAPES) - set(first))
    forms = {s for s in first if s not in SHAPES}           # a shape's forms (steer.SHAPE_FORMS)
    assert forms <= {f"{k}:{f}" for k, fs in SHAPE_FORMS.items() for f in fs}, forms


FORMS = {f"shape:{k}:{f}": FORM_TIMES for k, fs in SHAPE_FORMS.items() for f in fs}


def test_a_shape_of_several_forms_is_made_in_each_form_least_made_first():
    # a campaign aiming at `past:guard-spelled` makes every spelling before any again: the plant
    # that misreads one of six (bounds_not_flip) needs that one made (docs/fuzzing.md)
    counts = {f"shape:{s}": 6 for s in SHAPES if s != "past:guard-spelled"}
    made = Counter()
    for s in range(60):
        steer = Steering.from_counts(counts | {"shape:past:guard-spelled": sum(made.values())}
                                     | {f"shape:past:guard-spelled:{f}": n for f, n in made.items()})
        if "shape:past:guard-spelled" not in steer.missing:
            break
        for shape in generate(s, steer).shapes:
            if shape.startswith("past:guard-spelled:"):
                made[shape.rsplit(":", 1)[1]] += 1
    assert set(made) == set(SHAPE_FORMS["past:guard-spelled"]), made
    assert set(made.values()) == {FORM_TIMES}, made           # each twice, none a third time


def test_a_covered_shape_is_no_longer_aimed_at():
    paths = {f"lowering:{p}": PATH_TIMES for ps in PATHS.values() for p in ((ps,) if isinstance(ps, str) else ps)}
    covered = Steering.from_counts({f"shape:{s}": 6 for s in SHAPES} | {"shape:past:guard-le": 0} | paths | FORMS)
    assert covered.missing and all(not c.startswith("shape:") or c == "shape:past:guard-le" for c in covered.missing)
    made = set()
    for s in range(12):
        made |= generate(s, covered).shapes
    assert not {"group:sign-slip", "group:unordered"} <= made      # groups no longer forced


def test_a_shape_stays_aimed_at_until_variants_take_its_lowering_path():
    """A probe shape is covered once PATH_TIMES variant runs took the lowering path it exists for
    (steer.PATHS), not once programs made it (a program of the shape may meet no variant taking
    it); SHAPE_CAP programs end the aim whatever the count. A shape of several forms is missing
    until made once per form (steer.SHAPE_TIMES_BY)."""
    made = {f"shape:{s}": 6 for s in SHAPES} | FORMS
    taken = {f"lowering:{p}": PATH_TIMES for ps in PATHS.values() for p in ((ps,) if isinstance(ps, str) else ps)}
    assert not any(c.startswith("shape:") for c in Steering.from_counts(made | taken).missing)
    untaken = Steering.from_counts(made | taken | {"lowering:interleaved_offset_stores": PATH_TIMES - 1})
    assert [c for c in untaken.missing if c.startswith("shape:")] == ["shape:group:offset"]
    assert untaken.times_made("shape:group:offset") == 6
    capped = Steering.from_counts(made | taken | {"shape:group:offset": SHAPE_CAP,
                                                  "lowering:interleaved_offset_stores": 0})
    assert not any(c.startswith("shape:") for c in capped.missing)
    few = Steering.from_counts(made | taken | {"shape:past:guard-spelled": SHAPE_TIMES_BY["past:guard-spelled"] - 1})
    assert [c for c in few.missing if c.startswith("shape:")] == ["shape:past:guard-spelled"]
    assert Steering.from_json(few.to_json()) == few
    one_form_unmade = {k: v for k, v in made.items() if k != "shape:past:guard-spelled:not_lt_flip"}
    unmade = Steering.from_counts(one_form_unmade | taken)
    assert [c for c in unmade.missing if c.startswith("shape:")] == ["shape:past:guard-spelled"]
    assert unmade.times_made("shape:past:guard-spelled:not_gt") == FORM_TIMES


@kernel(block=8)
def _rmw(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = y[g] + x[g]


@kernel(block=8)
def _copy(x: Buffer[f32], y: Buffer[f32]):
    g = global_id()
    y[g] = x[g] * 2.0


def _case(k, n=37):
    return Case(k.ir, n, {}, tuple(BufferSpec(p.name, p.dtype, 40, "finite") for p in k.ir.params), {}, 7)


def test_a_program_that_is_not_idempotent_runs_a_multi_task_whole_block_pool_variant():
    case = _case(_rmw)
    app = variants_for(case)
    pref = rerun_sensitive(case, app)
    assert pref and all("full_packet=on" in v and "grain=" in v for v in pref)
    for key in ("a", "b", "c"):
        assert set(draw_variants(app, key, 4, pref)) & set(pref)
    assert rerun_sensitive(_case(_copy), variants_for(_case(_copy))) == []
    assert rerun_sensitive(_case(_rmw, 9), variants_for(_case(_rmw, 9))) == []    # one whole block
    assert np.all(np.array(draw_variants(app, "a", 4)) == np.array(draw_variants(app, "a", 4)))


def test_a_default_campaign_steers_every_other_seed():
    """`cohort fuzz` steers by default, but seeds 1, 3, 5, ... draw from the plain distribution
    (CampaignConfig.plain_every): aimed programs would otherwise fill a campaign's first minutes
    and starve the plain ones that find NaN compares and stride slips. The same rule on a
    cluster (cluster.run_seeds reads it from the task's spec)."""
    from cohort.verify.fuzz.campaign import Campaign
    from cohort.verify.fuzz.config import CampaignConfig, seed_steered
    assert [CampaignConfig().steered(i) for i in range(4)] == [True, False, True, False]
    assert not any(CampaignConfig(steer=False).steered(i) for i in range(4))
    assert all(CampaignConfig(plain_every=0).steered(i) for i in range(4))
    assert [seed_steered(i, True, 3) for i in range(6)] == [True, True, False, True, True, False]
    c = Campaign(CampaignConfig(jobs=0))
    assert c.steering(1) is None and isinstance(c.steering(0), Steering) and c.steering(0).missing


def test_a_dask_worker_steers_with_what_it_ran_since_the_task_was_made(monkeypatch):
    """On a cluster the driver hears of a program only when its task ends: a worker adds the
    programs it ran after the driver made the task (and no earlier ones: those the driver has)."""
    import time

    from cohort.verify.fuzz import cluster
    from cohort.verify.fuzz.coverage import Coverage as Cov
    monkeypatch.setattr(cluster, "_ran", cluster.deque(maxlen=8))
    spec = {"coverage": {}, "covered_at": time.time(), "plain_every": 2}
    assert cluster.steering_for(spec, 1) is None                   # a plain seed
    assert cluster.steering_for({"plain_every": 2}, 0) is None     # a campaign without steering
    missing = set(cluster.steering_for(spec, 0).missing)
    assert "shape:wrap:loop" in missing
    done = Cov()
    done.shapes.update({"wrap:loop": 2})
    cluster._ran.append((spec["covered_at"] - 1, done.counts()))    # before the task: the driver's
    assert "shape:wrap:loop" in set(cluster.steering_for(spec, 0).missing)
    cluster._ran.append((spec["covered_at"] + 1, done.counts()))
    assert set(cluster.steering_for(spec, 0).missing) == missing - {"shape:wrap:loop"}


def test_a_campaign_report_names_its_steering():
    from cohort.verify.fuzz.config import CampaignConfig
    from cohort.verify.fuzz.summary import session_report
    from cohort.verify.fuzz.tally import Tally
    said = [session_report(CampaignConfig(**kw), Tally(), 1.0, [], False)["steering"]
            for kw in ({}, {"steer": False}, {"plain_every": 0}, {"plain_every": 1}, {"plain_every": 3})]
    assert said == ["mixed", "off", "on", "off", "steered but 1 seed in 3 plain"]


@pytest.mark.parametrize("f16", ["software", "hardware"])
def test_f16_and_bf16_programs_agree_with_the_interpreter(f16, monkeypatch):
    """`storage:half` (gen/storage.py): f16/bf16 inputs read as f32 and a 16-bit buffer written
    contiguously, under a mask and as a pair, at the types' rounding edges: every variant bit
    for bit with the interpreter, under both f16 conversions (COHORT_F16)."""
    from cohort.verify.execute import execute
    monkeypatch.setenv("COHORT_F16", f16)
    steer = Steering.from_report(Coverage().report())
    made = [c for c in (generate(s, steer) for s in range(40)) if "storage:half" in c.shapes][:2]
    assert len(made) == 2
    for case in made[int(f16 == "hardware"):][:1]:      # a program each
        assert any(b.dtype.is_storage for b in case.buffers)
        res = execute(case, ["whole", "lanes=8,full_packet=on,predicated=on,private=cohort",
                             "lanes=4,full_packet=off,predicated=off,private=thread"], full=False)
        assert all(r["status"] == "ok" for r in res["variants"].values()), res["variants"]
