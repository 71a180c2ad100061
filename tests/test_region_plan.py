"""The region plan (backend/region_plan.py): an analysis of the specialised IR, before any code,
that the lowering emits as it is and `cohort run --dump regions` prints."""
import json

from test_cooperative import tree_sum  # the hand-written reduction tree

from cohort.backend import codegen
from cohort.backend.compiler import compile_kernel
from cohort.backend.inject import inject_bug_TESTING_ONLY
from cohort.backend.lowering import Lowering
from cohort.backend.region_plan import BlockFor, Packets, plan_regions
from cohort.backend.variant import parse_variant
from cohort.cli import main
from cohort.refimpl.specialize import specialize

TREE = specialize(tree_sum.ir, {"LOG": 3})


def test_the_plan_of_a_hand_written_tree():
    plan = plan_regions(TREE)
    assert [type(r) for r in plan.regions] == [Packets, BlockFor, Packets]
    assert plan.cross == {"t"}                   # used by all three regions; half lives in one
    assert plan.block_loops == ("k",) and plan.barriers == 2 and plan.collectives == ()
    assert plan.describe() == ["packets: 3 statement(s), then barrier",
                               "block for k in range(0, 3, 1):",
                               "  packets: 2 statement(s), then barrier",
                               "packets: 1 statement(s)",
                               "kept per thread across regions: t",
                               "one value per block (block-level loop variables): k"]


def test_the_lowering_emits_the_plan_and_the_build_keeps_it():
    for variant in ("whole", "packet"):
        L = Lowering(TREE, "entry", codegen.resolve(parse_variant(variant)))
        L.lower()
        assert L.plan == plan_regions(TREE)
        assert list(L.storage.block_slots) == ["k"]
    ck = compile_kernel(tree_sum, {"LOG": 3}, "packet", n=64)
    assert ck.region_plan == plan_regions(ck.kernel) and ck.regions == ck.region_plan.outline()


def test_planted_bugs_reach_the_plan_through_the_build():
    late = plan_regions(TREE, ("barrier_late",))      # a barrier's region takes the statement after it
    assert late.outline()[0] == "packets: 3 statement(s)" and late.outline()[-1] == "packets: 1 statement(s), then barrier"
    assert plan_regions(TREE) != late
    with inject_bug_TESTING_ONLY("barrier_late"):
        ck = compile_kernel(tree_sum, {"LOG": 3}, "packet", n=64)
    assert ck.config.bugs == ("barrier_late",) and ck.region_plan == plan_regions(ck.kernel, ("barrier_late",))


def test_cli_dump_regions_prints_the_plan(capsys):
    assert main(["run", "cumsum", "--shape", "3x63", "--variant", "packet", "--dump", "regions"]) == 0
    out = capsys.readouterr().out
    assert "  region plan:\n    packets:" in out and "\n    block for " in out
    assert "\n    kept per thread across regions: " in out
    assert main(["run", "cumsum", "--shape", "3x63", "--variant", "whole", "--dump", "regions", "--json"]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert any(line.startswith("block for ") for line in r["regions"]) and "dumped" not in r


def test_cli_dump_dir_writes_the_plan(tmp_path, capsys):
    assert main(["run", "cumsum", "--shape", "3x63", "--variant", "whole", "--dump", str(tmp_path)]) == 0
    text = next(tmp_path.glob("*.regions.txt")).read_text()
    assert "block for " in text and "kept per thread across regions: " in text


def test_cli_check_dump_regions_prints_a_users_kernels_plan(capsys):
    from pathlib import Path
    example = str(Path(__file__).resolve().parent.parent / "examples" / "block_sum.py") + "::block_sum"
    assert main(["check", example, "--n", "1000", "--arg", "sums=32", "--variant", "whole", "--dump", "regions"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("region plan:\n  packets: 4 statement(s), then barrier\n  block for k in range(0, 5, 1):\n")
    assert "  kept per thread across regions: t\n" in out and "\nok block_sum n=1000" in out
    assert main(["check", example, "--n", "1000", "--dump", "ir"]) == 2
