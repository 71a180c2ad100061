"""Campaign reports as text, and the mutation check (each injected bug alone: caught?)."""
from __future__ import annotations

from .run import run_campaign


def format_failure(f: dict) -> str:
    how = (f"shrunk from {f.get('statements_before')} to {f.get('statements_after')} statements in "
           f"{f.get('shrink_steps')} steps" if f.get("shrunk") else "not shrunk")
    lines = [f"FAILURE {f['kind']} on {f['variant']} (found after {f['found_after_seconds']} s; {how})",
             f"  {f['description']}",
             f"  {f['case']}",
             f"  failing variants: {', '.join(f['failing_variants'])}"]
    if f.get("case_file"):
        lines.append(f"  replay: {f['case_file']}")
    lines.append("  " + f["kernel"].replace("\n", "\n  "))
    return "\n".join(lines)


def format_report(r: dict) -> str:
    lines = [f"fuzz seed {r['seed']}: {r['programs']} programs in {r['seconds']:.1f} s "
             f"({r['programs_per_second']:.2f}/s), {r['variant_runs']} variant runs, "
             f"{r['discarded']} discarded ({100 * r['discard_rate']:.1f}%), {r['mismatches']} failing variant runs"
             + (" (interrupted)" if r.get("interrupted") else "")]
    if r["programs"] == 0:
        lines.append("NOTHING TESTED: no program ran to completion within the time box (the first compiles "
                     "take seconds); give more --seconds")
    if r["injected_bugs"]:
        lines.append(f"injected bugs: {', '.join(r['injected_bugs'])}")
    lines.append(f"checksum bins per program: {r['bins']}")
    gaps = r["coverage"]["gaps"]
    lines.append("coverage gaps: " + (", ".join(gaps) if gaps else "none"))
    for f in r["failures"]:
        lines.append(format_failure(f))
    c = r.get("campaign")
    if c:
        lines.append(f"campaign {c['dir']}: {c['seeds_done']} seeds done ({c['seeds_this_run']} this run), "
                     f"{c['programs']} programs, {c['variant_runs']} variant runs, {c['mismatches']} failing "
                     f"variant runs in {len(c['failure_bins'])} bin(s)")
        for b, v in sorted(c["failure_bins"].items()):
            lines.append(f"  bin {b}: {v['count']} failure(s), {v['kind']} on {v['variant']}"
                         f"{' (shrunk)' if v['shrunk'] else ''}: {v['case_file']}")
        for w, v in sorted(c["workers"].items()):
            lines.append(f"  worker {w}: {v['programs']} programs in {v['seconds']:.0f} s busy "
                         f"({v['programs_per_second']:.2f}/s)")
    return "\n".join(lines)


def mutation_table(seconds_per_bug: float = 60.0, seed: int = 0, jobs: int = 2, shrink_seconds: float = 30.0,
                   bugs=None, **campaign) -> list:
    """Each injected backend bug alone: is it caught, how fast, and the minimal kernel.
    `campaign`: further run_campaign keywords (scheduler, variants_per_program, steer, shrink)."""
    from ...backend.inject import BUGS
    rows = []
    for bug in (bugs or sorted(BUGS)):
        r = run_campaign(seconds_per_bug, seed, bugs=(bug,), jobs=jobs, stop_on_failure=True,
                         shrink_seconds=shrink_seconds, max_shrinks=1, **campaign)
        f = r["failures"][0] if r["failures"] else None
        rows.append({"bug": bug, "caught": bool(f), "seconds_to_catch": f and f["found_after_seconds"],
                     "programs": r["programs"], "seconds": r["seconds"], "kind": f and f["kind"],
                     "variant": f and f["variant"], "kernel": f and f.get("kernel"),
                     "description": f and f["description"]})
    return rows
