"""fuzz/rotation.py: the variants a program runs when a campaign draws a subset per program."""
import collections
import subprocess
import sys

import pytest

from cohort.verify.fuzz.rotation import draw_variants, knob_values
from cohort.verify.matrix import DEFAULT_VARIANTS

MATRIX = list(DEFAULT_VARIANTS)


def test_all_when_not_limited_or_limit_covers_the_matrix():
    assert draw_variants(MATRIX, "k", None) == MATRIX
    assert draw_variants(MATRIX, "k", len(MATRIX)) == MATRIX
    assert draw_variants(MATRIX[:3], "k", 10) == MATRIX[:3]


def test_whole_plus_drawn_in_matrix_order():
    got = draw_variants(MATRIX, "some key", 4)
    assert len(got) == 4 and got[0] == "whole"
    assert got == [v for v in MATRIX if v in got]            # matrix order kept
    assert len(set(got)) == 4


def test_one_variant_is_whole_and_no_whole_means_four_drawn():
    assert draw_variants(MATRIX, "k", 1) == ["whole"]
    rest = MATRIX[1:]
    assert len(draw_variants(rest, "k", 4)) == 4


def test_draw_depends_on_the_key_only():
    a = draw_variants(MATRIX, "abc", 5)
    assert draw_variants(MATRIX, "abc", 5) == a
    assert any(draw_variants(MATRIX, f"key{i}", 5) != a for i in range(10))


def test_same_draw_in_another_process():
    """A cluster worker and the driver (or a resumed campaign) must draw the same variants:
    the draw may not depend on the process' hash seed."""
    code = ("from cohort.verify.fuzz.rotation import draw_variants, knob_values; from cohort.verify.matrix import "
            "DEFAULT_VARIANTS as M; print(draw_variants(list(M), 'sha256:0f3a', 5))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(h), "PATH": ""}).stdout for h in (1, 2)}
    assert len(outs) == 1
    assert outs.pop().strip() == str(draw_variants(MATRIX, "sha256:0f3a", 5))


def test_every_variant_is_drawn_and_none_dominates():
    counts = collections.Counter()
    n = 3000
    for i in range(n):
        counts.update(draw_variants(MATRIX, f"program-{i}", 5))
    assert counts["whole"] == n
    others = [counts[v] for v in MATRIX[1:]]
    assert min(others) > 0.02 * n, sorted(counts.items(), key=lambda t: t[1])[:5]
    assert max(others) < 0.6 * n, sorted(counts.items(), key=lambda t: -t[1])[:5]


def test_a_program_covers_the_knob_values():
    """Three drawn packet variants cover both values of full_packet, predicated and private
    (the matrix's packet specs all carry the three knobs), and no two picks are the same."""
    for i in range(200):
        got = draw_variants(MATRIX, f"p{i}", 4)
        values = set().union(*(knob_values(v) for v in got))
        for knob, both in (("full_packet", {"on", "off"}), ("predicated", {"on", "off"}),
                           ("private", {"cohort", "thread"})):
            assert {v for k, v in values if k == knob} == both, (knob, got)


def test_knob_values_of_a_spec():
    assert knob_values("whole") == {("lanes", "1")}
    assert knob_values("whole,grain=1,workers=2") == {("lanes", "1"), ("family", "pool")}
    assert knob_values("lanes=8,full_packet=off,predicated=on,private=thread,checked=on") == {
        ("lanes", "8"), ("full_packet", "off"), ("predicated", "on"), ("private", "thread"), ("family", "checks")}
    assert ("family", "interleave") in knob_values("lanes=4,full_packet=on,predicated=on,private=cohort,interleave=2")


def test_bad_count_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        draw_variants(MATRIX, "k", 0)


def test_campaign_runs_the_drawn_variants_only(tmp_path, monkeypatch):
    from cohort.verify.fuzz import campaign, run_campaign
    stressed = []
    real = campaign.needs_stress

    def counting(case):
        stressed.append(real(case))
        return stressed[-1]

    monkeypatch.setattr(campaign, "needs_stress", counting)
    r = run_campaign(120, seed=3, jobs=0, max_programs=3, shrink=False, corpus_dir=None,
                     variants_per_program=2, campaign_dir=str(tmp_path / "c"))
    assert r["programs"] == 3 and not r["failures"]
    # the two drawn variants, plus the stress check's pseudo-variant for each program with
    # global integer atomics (fuzz/stress.py)
    assert r["programs"] <= r["variant_runs"] <= 2 * r["programs"] + sum(stressed)
    import json
    meaning = json.loads((tmp_path / "c" / "campaign.json").read_text())
    assert meaning["variants_per_program"] == 2
    from cohort.verify.fuzz import CampaignError
    with pytest.raises(CampaignError, match="variants_per_program"):    # a seed means something else now
        run_campaign(120, seed=3, jobs=0, max_programs=1, shrink=False, corpus_dir=None,
                     variants_per_program=3, campaign_dir=str(tmp_path / "c"))


@pytest.mark.parametrize("argv, expected", [
    ([], "default"),                                              # the campaign's default (4)
    (["--variants-per-program", "all"], None),
    (["--variants-per-program", "3"], 3),
    (["--variant", "whole", "--variant", "packet"], None),           # named variants all run
    (["--variant", "whole", "--variants-per-program", "2"], 2),
])
def test_cli_variants_per_program(argv, expected):
    from cohort.cli import _parser
    from cohort.cli_fuzz import _fuzz_options
    kw = _fuzz_options(_parser().parse_args(["fuzz", *argv]))
    if expected == "default":
        assert "variants_per_program" not in kw
        from cohort.verify.fuzz import CampaignConfig
        assert CampaignConfig().variants_per_program == 4
    else:
        assert kw["variants_per_program"] == expected
