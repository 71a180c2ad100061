"""The command line's checks of its own input, and what the user's environment refused (issue 28).

Every numeric option is bounded (far beyond any real use, short of runaway memory; the
bounds are stated in --help), an empty list or an empty option is refused, and each error
names only the option it is about. A full disk, a quota, a read-only or forbidden path and
exhausted memory are the user's environment: one line naming the resource and the path or
size (exit 2), never "a bug in cohort". Part of the CLI layer (cli.py imports it).
"""
from __future__ import annotations

import argparse
import errno
import math
import os


class UsageError(Exception):
    """Bad usage or bad input: exit 2 with this one line."""


# Bounds of the numeric options (stated in --help): far beyond any real use, short of runaway memory.
MAX_ROUNDS = 1000                 # bench --rounds (the suites use 2 to 10)
MAX_SAMPLES = 1000                # bench --samples (the suites use 5 to 7)
MAX_FUZZ_SECONDS = 1_000_000      # fuzz --seconds (11.6 days)
MAX_PROGRAMS = 10 ** 7            # fuzz --programs
MAX_SEEDS = 10 ** 7               # fuzz --seeds
MAX_JOBS = 64                     # fuzz --jobs
MAX_PER_SEED = 1000               # fuzz --examples-per-seed, --seeds-per-task, --variants-per-program
MAX_STMTS = 64                    # fuzz --max-stmts
MAX_DIMS = 8                      # bench --sizes: numbers in a shape (attention has 7)
SHAPE_LIMIT = (1 << 30) - 1       # elements of any buffer (refimpl/ops/base.py parse_shape)


def int_in_range(flag: str, text, lo: int, hi: int):
    """`text` as an integer in lo..hi (None stays None), else a usage error naming `flag` and its range."""
    if text is None:
        return None
    try:
        v = int(str(text).strip())
    except ValueError:
        raise UsageError(f"{flag} takes an integer from {lo} to {hi}, got {text!r}") from None
    if not lo <= v <= hi:
        raise UsageError(f"{flag} must be from {lo} to {hi}, got {v}")
    return v


def comma_list(flag: str, text: str) -> list:
    """A comma-separated list; an empty item ("a,,b", "a,") is a usage error, not ignored."""
    items = [t.strip() for t in text.split(",")]
    if not all(items):
        raise UsageError(f"{flag} {text!r}: an empty item in the list")
    return items


def normalised_shape(flag: str, text: str) -> str:
    """A shape of --sizes, normalised ("17X065" -> "17x65"): positive numbers, a buffer's worth at most."""
    parts = text.lower().replace("×", "x").split("x")
    if not all(p.strip().isdigit() for p in parts) or len(parts) > MAX_DIMS:
        raise UsageError(f"{flag}: malformed shape {text!r}: up to {MAX_DIMS} positive integers joined by x")
    dims = [int(p) for p in parts]
    if min(dims) < 1:
        raise UsageError(f"{flag}: {text}: every dimension must be positive")
    if math.prod(dims) > SHAPE_LIMIT:
        raise UsageError(f"{flag}: {text}: {math.prod(dims)} elements; at most {SHAPE_LIMIT}")
    return "x".join(map(str, dims))


def check_cases(suite: str, only_ops, only_sizes, shapes: list):
    """Refuse a selection of no case, and any --sizes shape the suite does not have for the
    chosen operators (`shapes`): the tables would lack it without a word."""
    if not shapes:
        raise UsageError(f"suite {suite} has no case matching --ops/--sizes")
    unmatched = sorted((only_sizes or set()) - set(shapes))
    if unmatched:
        raise UsageError(f"--sizes: {', '.join(unmatched)}: not among suite {suite}'s shapes"
                         f"{' for ' + ','.join(only_ops) if only_ops else ''} "
                         f"({', '.join(sorted(set(shapes)))})")


def _options(parser, args=None):
    """Every action of `parser` and its subparsers (with `args`: only those of the command given)."""
    for a in parser._actions:
        yield a
        if isinstance(a, argparse._SubParsersAction):
            chosen = [a.choices.get(getattr(args, a.dest, None))] if args is not None else a.choices.values()
            for sub in chosen:
                if sub is not None:
                    yield from _options(sub, args)


def dash_values(parser, argv: list) -> list:
    """`--shape -1x65` as `--shape=-1x65`: argparse takes a value that starts with '-' for an
    option of its own ("expected one argument"); the option's own check then says what is wrong."""
    actions = list(_options(parser))
    known = {o for a in actions for o in a.option_strings}
    takes_one = {o for a in actions if a.option_strings and a.nargs is None for o in a.option_strings}
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if tok in takes_one and nxt and nxt.startswith("-") and not nxt.startswith("--") and nxt not in known:
            out.append(f"{tok}={nxt}")
            i += 2
        else:
            out.append(tok)
            i += 1
    return out


def refuse_empty(parser, args):
    """An option given as "" is a mistake (a shell variable that was not set), never "the default"."""
    for a in _options(parser, args):
        value = getattr(args, a.dest, None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            raise UsageError(f"{a.option_strings[-1] if a.option_strings else a.dest}: empty")


# What the user's environment refused (exit 2, one line), by errno: never "a bug in cohort".
ENVIRONMENT_ERRNOS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
                      errno.EFBIG: "file too large", errno.EROFS: "read-only file system",
                      errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
                      errno.ENOMEM: "out of memory"}


def environment_error(e: BaseException):
    """The one line for a failure of the user's environment (disk space, quota, a read-only or
    forbidden path, memory), naming the resource and the path or size; None for anything else."""
    if isinstance(e, MemoryError):
        asked = str(e) or "an allocation failed"
        return f"out of memory: {asked} (the machine's memory or this process's limit, e.g. ulimit -v)"
    if isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS:
        where = f": {e.filename}" if e.filename else ""
        return f"{ENVIRONMENT_ERRNOS[e.errno]}{where}"
    return None


def parse_seed(text: str) -> int:
    try:
        seed = int(text, 0)
    except ValueError:
        raise UsageError(f"--seed must be a non-negative integer, got {text!r}") from None
    if not 0 <= seed < 2 ** 63:
        raise UsageError(f"--seed must be in 0..2^63-1, got {seed}")
    return seed


def writable_dir(flag: str, directory: str):
    """`directory` exists (made now if need be) and takes files; else a usage error."""
    import tempfile
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{flag} {directory}: exists and is not a directory")
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {directory}: {e.strerror or e}") from None
