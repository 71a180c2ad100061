"""`cohort fuzz` (DESIGN §9): its options checked before any work, the campaign run, and what an
interrupted campaign says (what it kept and the exact command that resumes it)."""
from __future__ import annotations

import json
import sys

from . import cli_options as opt
from .cli_options import UsageError, comma_list, int_in_range, parse_seed, writable_dir


def _fuzz_options(args) -> dict:
    """The campaign keywords of `cohort fuzz`'s options (usage errors before any work)."""
    from .backend.inject import BUGS
    try:
        seconds = float(args.seconds)
    except ValueError:
        raise UsageError(f"--seconds takes a number of seconds, more than 0 and at most {opt.MAX_FUZZ_SECONDS}, "
                         f"got {args.seconds!r}") from None
    if not 0 < seconds <= opt.MAX_FUZZ_SECONDS:     # NaN fails this too
        raise UsageError(f"--seconds must be more than 0 and at most {opt.MAX_FUZZ_SECONDS}, got {args.seconds}")
    jobs = int_in_range("--jobs", args.jobs, 0, opt.MAX_JOBS)
    programs = int_in_range("--programs", args.programs, 1, opt.MAX_PROGRAMS)
    if args.corpus:
        writable_dir("--corpus", args.corpus)
    bugs = () if args.inject is None else tuple(comma_list("--inject", args.inject))
    unknown = [b for b in bugs if b not in BUGS]
    if unknown:
        raise UsageError(f"--inject: unknown bug(s) {', '.join(unknown)}; known: {', '.join(sorted(BUGS))}")
    kw = dict(jobs=jobs, bugs=bugs, shrink=not args.no_shrink, progress=sys.stderr.isatty(), max_programs=programs,
              seeds=int_in_range("--seeds", args.seeds, 1, opt.MAX_SEEDS),
              seeds_per_task=int_in_range("--seeds-per-task", args.seeds_per_task, 1, opt.MAX_PER_SEED),
              batch=int_in_range("--examples-per-seed", args.examples_per_seed, 1, opt.MAX_PER_SEED),
              max_stmts=int_in_range("--max-stmts", args.max_stmts, 1, opt.MAX_STMTS))
    if args.steer is not None:
        kw["steer"] = args.steer != "off"
        if args.steer == "on":
            kw["plain_every"] = 0
    if args.variants_per_program is not None:
        vpp = args.variants_per_program
        kw["variants_per_program"] = None if vpp == "all" else int_in_range("--variants-per-program", vpp, 1,
                                                                      opt.MAX_PER_SEED)
    elif args.variant:                   # variants named on the command line all run on every program
        kw["variants_per_program"] = None
    if args.variant:
        from .backend.variant import VariantError, parse_variant
        from .verify.matrix import short_name
        for v in args.variant:
            comma_list("--variant", v)
        try:
            kw["variants"] = tuple(dict.fromkeys(short_name(parse_variant(v)) for v in args.variant))
        except VariantError as e:
            raise UsageError(f"--variant: {e}") from None
    if args.scheduler:
        sched = args.scheduler
        if sched.startswith("local:") and int_in_range("--scheduler local:N", sched[6:], 1, 256) is None:
            raise UsageError("--scheduler local:N needs N")
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise UsageError("--scheduler needs Dask distributed: pip install 'cohort[cluster]'") from None
        kw["scheduler"] = sched
    if args.campaign:
        writable_dir("--campaign", args.campaign)
        kw["campaign_dir"] = args.campaign
    return {"seconds": seconds, **kw}


def _resume_hint(args, report: dict) -> str:
    """What an interrupted campaign says: what it kept and the exact command that goes on."""
    import shlex
    command = shlex.join(["cohort", *args.argv])
    done = f"interrupted after {report['programs']} programs (the programs in flight dropped)"
    if args.campaign:
        c = report.get("campaign") or {}
        return (f"{done}; the campaign's state is in {args.campaign} ({c.get('seeds_done', 0)} seeds done, "
                f"{len(c.get('failure_bins', {}))} failure bin(s)); resume with: {command}")
    return (f"{done}; nothing was kept to resume from (no --campaign): {command} --campaign DIR keeps a "
            "campaign's state, and the same command again resumes it")


# options of the thread family that mean nothing to the tile family, and their defaults
_THREADS_ONLY = {"scheduler": None, "campaign": None, "merge": None, "variant": None, "variants_per_program": None,
                 "steer": None, "seeds": None, "seeds_per_task": "1", "examples_per_seed": "9", "max_stmts": "16"}


def cmd_fuzz_tiles(args) -> int:
    """`cohort fuzz --family tiles`: one line per finding, exit 1 on any, 2 on bad input."""
    from .backend.inject import BUGS
    from .verify.fuzz.tile_campaign import format_finding, format_report, run_tile_campaign
    from .verify.fuzz.tiles import TritonMissing
    given = [k for k, d in _THREADS_ONLY.items() if getattr(args, k, d) not in (d, False)]
    if given:
        raise UsageError(f"--family tiles does not take {', '.join('--' + k.replace('_', '-') for k in given)} "
                         "(options of the thread-level family)")
    try:
        seconds = float(args.seconds)
    except ValueError:
        raise UsageError(f"--seconds takes a number of seconds, got {args.seconds!r}") from None
    if not 0 < seconds <= opt.MAX_FUZZ_SECONDS:
        raise UsageError(f"--seconds must be more than 0 and at most {opt.MAX_FUZZ_SECONDS}, got {args.seconds}")
    jobs = int_in_range("--jobs", args.jobs, 0, opt.MAX_JOBS)
    programs = int_in_range("--programs", args.programs, 1, opt.MAX_PROGRAMS)
    bugs = () if args.inject is None else tuple(comma_list("--inject", args.inject))
    unknown = [b for b in bugs if b not in BUGS]
    if unknown:
        raise UsageError(f"--inject: unknown bug(s) {', '.join(unknown)}; known: {', '.join(sorted(BUGS))}")
    other = [b for b in bugs if not b.startswith("triton_")]
    if other:
        raise UsageError(f"--inject {', '.join(other)}: not a plant of the tile lowering; --family tiles takes "
                         f"{', '.join(sorted(b for b in BUGS if b.startswith('triton_')))}")
    if args.corpus:
        writable_dir("--corpus", args.corpus)
    try:
        report = run_tile_campaign(seconds, parse_seed(args.seed), max_programs=programs, bugs=bugs, jobs=jobs,
                                   shrink=not args.no_shrink, corpus_dir=args.corpus, strict_nan=args.strict_nan,
                                   on_finding=lambda f: print(format_finding(f), flush=True))
    except TritonMissing as e:
        raise UsageError(str(e)) from None
    print(format_report(report).split("\n")[0])
    for line in format_report(report).split("\n")[1:]:
        if not line.startswith("tiles "):          # the findings were printed as they were found
            print(line)
    if args.json:
        print(json.dumps(report))
    return 1 if report["failures"] or report["programs"] == 0 else 0


def cmd_fuzz(args) -> int:
    if getattr(args, "family", "threads") == "tiles":
        return cmd_fuzz_tiles(args)
    if getattr(args, "strict_nan", False):
        raise UsageError("--strict-nan is an option of --family tiles")
    from .verify.fuzz import CampaignError, default_corpus_dir, format_report, merge, run_campaign
    from .verify.fuzz.cluster import SchedulerUnavailable
    if args.merge:
        if not args.campaign:
            raise UsageError("--merge A B ... needs --campaign DIR, the merged campaign")
        try:
            merge(args.merge, args.campaign).close()
        except CampaignError as e:
            raise UsageError(str(e)) from None
        print(f"merged {len(args.merge)} campaigns into {args.campaign}")
        return 0
    kw = _fuzz_options(args)
    corpus = args.corpus or (None if kw["bugs"] else default_corpus_dir())   # injected bugs: no corpus by default
    try:
        report = run_campaign(kw.pop("seconds"), parse_seed(args.seed), corpus_dir=corpus, **kw)
    except CampaignError as e:
        raise UsageError(str(e)) from None
    except SchedulerUnavailable as e:
        raise UsageError(f"--scheduler {args.scheduler}: {e}") from None
    c = report.get("campaign")
    if c and c.get("complete") and not report["programs"] and not report["interrupted"]:
        # run again after its --seeds were all done: nothing to test, nothing failed
        n = kw["seeds"]
        print(f"campaign {args.campaign} is complete: {n} seed{'' if n == 1 else 's'} of {n} done; nothing to run")
        print("\n".join(line for line in format_report(report).splitlines()
                        if line.startswith(("campaign ", "  bin "))))
        if args.json:
            print(json.dumps(report))
        return 1 if c["failure_bins"] else 0
    print(format_report(report))
    if args.json:
        print(json.dumps(report))
    if report["interrupted"]:
        print(_resume_hint(args, report), file=sys.stderr)
        return 130                     # as bench: an interrupted campaign did not pass
    if report.get("scheduler_lost"):
        print(f"scheduler lost ({report['scheduler_lost']}); the same command resumes the campaign"
              if args.campaign else f"scheduler lost ({report['scheduler_lost']})", file=sys.stderr)
        return 1
    # a campaign that tested nothing has not passed either (exit 1; format_report says why)
    return 1 if report["failures"] or report["programs"] == 0 else 0
