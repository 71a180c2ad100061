"""python -m cohort.triton [--mode MODE] SCRIPT.py [ARGS...]: run a script with its Triton
launches on cohort (as TRITON_INTERPRET=1 runs them on triton's interpreter)."""
from __future__ import annotations

import argparse
import os
import runpy
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cohort.triton", description=__doc__)
    ap.add_argument("--mode", default="reference", help="reference (the exact interpreter, the default), native "
                    "(compiled) or check (both, compared bit for bit)")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)
    import cohort.triton as ct
    if not os.path.isfile(ns.script):
        print(f"cohort.triton: script {ns.script!r} not found", file=sys.stderr)
        return 2
    os.environ.pop("TRITON_INTERPRET", None)     # triton's own interpreter would take the launches
    try:
        ct.activate(ns.mode)
    except (ct.ModeNotAvailable, ValueError, ImportError) as e:
        print(f"cohort.triton: {e}", file=sys.stderr)
        return 2
    sys.argv = [ns.script] + ns.args
    sys.path.insert(0, os.path.dirname(os.path.abspath(ns.script)))
    try:
        runpy.run_path(ns.script, run_name="__main__")
    except ct.TritonError as e:
        print(f"cohort.triton: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
