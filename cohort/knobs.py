"""Every environment variable cohort reads, one typed entry each (docs/knobs.md is this table).

Code asks a knob (`knobs.FMA.get()`), never `os.environ`: a knob is read when it is asked
(tests and the fuzzer set the codegen switches per build), an unset or empty variable is the
default, and a value outside the allowed ones raises KnobError naming the variable and what it
allows. `overridden({...})` sets knobs for the calls inside it in this thread (the fuzzer's
per-program lowering switches) without writing the process environment.

The codegen switches (FMA, F16, MASKED_STORE) are resolved once per build into the build's
CodegenConfig (backend/codegen.py), whose key is the compile key. tests/test_knobs.py checks
that no other module reads the environment, that every COHORT_* name in the tree is here, and
that docs/knobs.md is `python -m cohort.knobs`'s output.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass
from typing import Optional


class KnobError(ValueError):
    """An environment variable holds a value its knob does not allow."""


_OFF = ("0", "off", "false", "no")


@dataclass(frozen=True)
class Knob:
    name: str                    # the environment variable
    kind: str                    # choice | int | float | path | flag | text
    default: object              # the value when unset or empty
    area: str                    # who reads it: codegen, runtime, cache, cli, fuzzer, test suite, ...
    doc: str                     # one line: what it changes
    choices: tuple = ()          # kind choice: the values allowed
    low: Optional[float] = None  # kind int / float: the least value allowed
    high: Optional[float] = None

    def raw(self) -> Optional[str]:
        """The text set for this knob (an override, else the environment), None when unset or empty."""
        over = _overrides.get()
        v = over.get(self.name) if over and self.name in over else os.environ.get(self.name)
        v = None if v is None else v.strip()
        return v or None

    def get(self):
        """The knob's typed value now."""
        return self.parse(self.raw())

    def parse(self, text: Optional[str]):
        if text is None:
            return self.default
        if self.kind == "choice":
            if text not in self.choices:
                raise self._bad(text)
            return text
        if self.kind in ("int", "float"):
            try:
                v = int(text) if self.kind == "int" else float(text)
            except ValueError:
                raise self._bad(text) from None
            if (self.low is not None and v < self.low) or (self.high is not None and v > self.high):
                raise self._bad(text)
            return v
        if self.kind == "flag":
            return text.lower() not in _OFF
        if self.kind == "path":
            return None if text.lower() in _OFF else os.path.expanduser(text)
        return text

    @property
    def allowed(self) -> str:
        """The values allowed, in words (errors and docs/knobs.md)."""
        if self.kind == "choice":
            return ", ".join(self.choices)
        if self.kind in ("int", "float"):
            word = "an integer" if self.kind == "int" else "a number"
            if self.high is not None:
                return f"{word} from {_num(self.low)} to {_num(self.high)}"
            return word if self.low is None else f"{word} >= {_num(self.low)}"
        if self.kind == "flag":
            return "unset, 0, off, false or no: off; any other value: on"
        if self.kind == "path":
            return "a folder (~ expanded); unset, 0 or off: none"
        return "any text"

    def _bad(self, text: str) -> KnobError:
        return KnobError(f"{self.name}={text!r}: expected {self.allowed}")


def _num(v) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


_overrides: contextvars.ContextVar = contextvars.ContextVar("cohort_knob_overrides", default=None)

# ---------------------------------------------------------------- the knobs
# codegen: the target-dependent lowering choices (backend/codegen.py resolves them per build)
FMA = Knob("COHORT_FMA", "choice", "auto", "codegen",
           "fma(a, b, c): llvm.fma (hardware) or the exact software sequence; auto: hardware where the "
           "target has FMA instructions", ("auto", "hardware", "software"))
F16 = Knob("COHORT_F16", "choice", "auto", "codegen",
           "f16 <-> f32: the target's half conversions (hardware) or integer operations; auto: hardware "
           "where the target converts exactly (F16C)", ("auto", "hardware", "software"))
MASKED_STORE = Knob("COHORT_MASKED_STORE", "choice", "auto", "codegen",
                    "a store under a lane mask: llvm.masked.store (intrinsic) or per-register branches first "
                    "(dispatch); auto: dispatch where the target microcodes masked stores",
                    ("auto", "intrinsic", "dispatch"))
# runtime
POOL = Knob("COHORT_POOL", "choice", "auto", "runtime",
            "auto: launches run on the team of an OpenMP runtime already loaded (torch's); cohort: always "
            "on the pool's own threads", ("auto", "cohort"))
TRITON_AUTOTUNE = Knob("COHORT_TRITON_AUTOTUNE", "choice", "time", "cohort.triton",
                      "@triton.autotune's choice among the configs left after pruning: time (the fastest "
                      "native build, as Triton times its own) or first (no timing: the same choice every run)",
                      ("time", "first"))
TORCH_CALL = Knob("COHORT_TORCH_CALL", "choice", "auto", "cohort.torch",
                  "the call path of cohort.torch's row and elementwise ops: native (C++ registered with the "
                  "dispatcher, built against torch's headers at first import, cached), python, or auto: native "
                  "when a cached build exists, else python while it builds in the background "
                  "(cohort/torch/native_call.py)", ("auto", "native", "python"))
# compiled-object cache
OBJECT_CACHE = Knob("COHORT_OBJECT_CACHE", "path", None, "cache",
                    "folder of LLVM's compiled objects, keyed by everything that decides them (opt-in)")
OBJECT_CACHE_MB = Knob("COHORT_OBJECT_CACHE_MB", "float", 1024.0, "cache",
                       "size of the object cache folder, MB, past which its least recently used entries go",
                       low=1)
# command line
DEBUG = Knob("COHORT_DEBUG", "flag", False, "cli",
             "an internal error (exit 3) shows its traceback instead of one line")
# fuzzer
FUZZ_O3_PERCENT = Knob("COHORT_FUZZ_O3_PERCENT", "int", 25, "fuzzer",
                       "share of fuzz programs compiled at O3 as a user's build (the rest at O1 or O0)",
                       low=0, high=100)
FUZZ_O0_PERCENT = Knob("COHORT_FUZZ_O0_PERCENT", "int", 40, "fuzzer",
                       "share of fuzz programs compiled with no LLVM optimisation", low=0, high=100)
FUZZ_TEST_CRASH = Knob("COHORT_FUZZ_TEST_CRASH", "text", None, "fuzzer tests",
                       "a fuzz worker aborts when compiling this variant (tests/test_fuzz.py)")
FUZZ_TEST_HANG = Knob("COHORT_FUZZ_TEST_HANG", "text", None, "fuzzer tests",
                      "a fuzz worker appends its pid to this file, then hangs (tests/test_fuzz_campaign.py)")
FUZZ_TEST_SEED_DELAY = Knob("COHORT_FUZZ_TEST_SEED_DELAY", "float", 0.0, "fuzzer tests",
                            "seconds a Dask fuzz task sleeps per seed, so a test can kill its worker mid-task",
                            low=0)
# the test suite and scripts (read there, listed here so the table is complete)
FUZZ_CI_PROGRAMS = Knob("COHORT_FUZZ_CI_PROGRAMS", "int", 15, "test suite",
                        "programs of tests/test_fuzz.py's clean campaign", low=1)
FUZZ_LONG_SECONDS = Knob("COHORT_FUZZ_LONG_SECONDS", "float", 900.0, "test suite",
                         "time box of tests/test_fuzz.py's long (slow-marked) campaign", low=0)
AARCH64_CACHE = Knob("COHORT_AARCH64_CACHE", "text", None, "scripts/test-aarch64",
                     "absolute folder for the aarch64 test image, read by the shell script (default "
                     "$XDG_CACHE_HOME/cohort/aarch64)")
# other programs' variables cohort honours
CXX = Knob("CXX", "text", None, "audit (eager column), cohort.torch",
           "the C++ compiler that builds the eager entry and the native call path (else c++, g++ or clang++ on "
           "PATH)")
XDG_CACHE_HOME = Knob("XDG_CACHE_HOME", "text", None, "audit (eager column), cohort.torch",
                      "where the eager entry's and the native call path's builds are cached "
                      "($XDG_CACHE_HOME/cohort/eager, .../torch_call; default ~/.cache)")

KNOBS = {k.name: k for k in (FMA, F16, MASKED_STORE, POOL, TRITON_AUTOTUNE, TORCH_CALL, OBJECT_CACHE, OBJECT_CACHE_MB, DEBUG,
                             FUZZ_O3_PERCENT, FUZZ_O0_PERCENT, FUZZ_TEST_CRASH, FUZZ_TEST_HANG,
                             FUZZ_TEST_SEED_DELAY, FUZZ_CI_PROGRAMS, FUZZ_LONG_SECONDS, AARCH64_CACHE,
                             CXX, XDG_CACHE_HOME)}


@contextlib.contextmanager
def overridden(settings: dict):
    """Knobs {variable: value} set for the calls inside, in this thread (contextvars), without
    writing the process environment. Each value is checked against its knob first."""
    for name, value in settings.items():
        if name not in KNOBS:
            raise KnobError(f"{name} is not a cohort knob; knobs are {', '.join(KNOBS)}")
        KNOBS[name].parse(str(value).strip() or None)
    token = _overrides.set({**(_overrides.get() or {}), **{k: str(v) for k, v in settings.items()}})
    try:
        yield
    finally:
        _overrides.reset(token)


def markdown() -> str:
    """docs/knobs.md."""
    rows = ["# Environment knobs", "",
            "Every environment variable cohort reads, generated by `python -m cohort.knobs > docs/knobs.md` from",
            "`cohort/knobs.py` (tests/test_knobs.py fails when they differ). Unset or empty is the default;",
            "any value outside the allowed ones is an error naming the variable. The codegen knobs are",
            "resolved once per build into its `CodegenConfig` (cohort/backend/codegen.py) and are part of",
            "the compile key.", "",
            "| variable | read by | default | allowed | what it changes |",
            "|---|---|---|---|---|"]
    for k in KNOBS.values():
        default = "unset" if k.default is None else "off" if k.default is False else _show(k.default)
        rows.append(f"| `{k.name}` | {k.area} | {default} | {k.allowed} | {k.doc} |")
    return "\n".join(rows) + "\n"


def _show(v) -> str:
    return _num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


if __name__ == "__main__":
    print(markdown(), end="")
