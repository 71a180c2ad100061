"""Differential fuzzing campaigns: random kernels, every variant, against the interpreter.

A campaign draws cases from `generate.cases()` (Hypothesis, fixed seed) until
its time box ends. For each case:

1. the interpreter runs it (the reference). If the interpreter rejects the
   launch (out of bounds, conflict, race, ...) the case is *discarded* and
   counted - the generator is built so that this stays rare;
2. every variant of the matrix (../matrix.py, DESIGN §5: lanes 1, 4, 8, 16 x
   full_packet x predicated x private, plus pinned interleaves, checked=on,
   unsafe=on and launches on the worker pool; variants whose lanes exceed the
   block are skipped, and a knob that cannot change this case's code or
   launch - `private` without private arrays, a pool for one task - is not
   varied) is compiled and checked: for packet variants the interpreter re-runs the compiled,
   specialised kernel with the backend's lane annotations checked; the native
   code runs on guarded copies of the inputs; outputs must be bit-identical
   (NaNs equal whatever their payload), guard bands intact, no native error;
3. outputs are binned by checksum (as YARPGen does): the reference's bin and
   the bins of the variants that disagree with it.

Any disagreement, annotation violation, guard-band hit, native error,
compiler error, crash or hang is a failure. Hypothesis then shrinks the case
against the failing variant that is cheapest to recompile (same failure
kind), and an IR-level reducer finishes the job (delete statements, replace
an `if` by a branch, a value by an operand, drop unused parameters), all
within a time budget; the minimal case is printed with its inputs seed and
variant, and written to the corpus as a replayable JSON case (`corpus.py`).

The time box covers generation: a case still running when it ends is
dropped (and counted), and shrinking a failure found in time may add up to
`shrink_seconds`. Ctrl-C ends a campaign early with a report.

fast_math variants are not in the matrix. Their contract is "within a stated
ulp bound per operator" (DESIGN §3), and no such bound exists for arbitrary
random programs: with reassociation and no-NaN/no-inf assumptions one
cancellation or one NaN input changes the result without limit (fast-math
flags even make a NaN operand poison, which may then reach an index). The
operator-level ulp checks belong to the operator tests, not to this fuzzer.

Compiles run in worker subprocesses (`python -m cohort.verify.fuzz --worker`,
workers.py): an LLVM fatal error kills a worker, not the campaign (the variant
is reported as a crash and the worker restarted), a hang is killed after a
timeout. With `jobs >= 2` the variants of a case are split over several
workers. With `scheduler`, seeds run as tasks on a Dask cluster (cluster.py);
with `campaign_dir`, a campaign is durable, resumable and mergeable (state.py).

The package:
    run.py       run_campaign: here or on a cluster, with or without a campaign directory
    config.py    CampaignConfig
    campaign.py  the local campaign (Hypothesis in this process, a local pool of workers)
    cluster.py   the same campaign as Dask tasks, a batch of seeds each
    summary.py   the report as data: this run's and the whole campaign's
    workers.py   worker processes and the pool that feeds them
    tally.py     counts, checksum bins and coverage of a run of programs
    coverage.py  what was exercised, and the gaps
    shrink.py    Hypothesis' shrinking of one failure, then reduce.py's IR reducer
    state.py     the campaign directory
    report.py    text reports, the mutation check
    cli.py       `python -m cohort.verify.fuzz`
One case's execution (reference, each variant through compare.verify_build)
is ../execute.py, the variant matrix ../matrix.py: corpus replays share them.
"""

from __future__ import annotations

from ..execute import FAILURE_STATUSES, execute, outputs_checksum, reference, run_variant
from ..matrix import DEFAULT_VARIANTS, FAST_MATH_NOTE, INTERLEAVE_VARIANTS, KNOB_MATRIX, short_name, variants_for
from .campaign import Campaign
from .config import CampaignConfig
from .coverage import Coverage
from .report import format_failure, format_report, mutation_table
from .run import default_corpus_dir, run_campaign
from .state import CampaignError, CampaignState, merge
from .workers import InProcess, WorkerPool

__all__ = ["FAILURE_STATUSES", "execute", "outputs_checksum", "reference", "run_variant", "DEFAULT_VARIANTS",
           "FAST_MATH_NOTE", "INTERLEAVE_VARIANTS", "KNOB_MATRIX", "short_name", "variants_for", "Campaign",
           "CampaignConfig", "default_corpus_dir", "run_campaign", "Coverage", "format_failure", "format_report",
           "mutation_table", "CampaignError", "CampaignState", "merge", "InProcess", "WorkerPool"]
