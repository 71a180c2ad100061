"""What check mode's race detector costs (cohort/triton/racecheck.py), per example kernel.

Each kernel of examples/triton_kernels.py at its default size, in check mode, with the detector
and with it replaced by none (the reference, the undefined-lane probe and native run either way):
the median of REPEATS launches after one untimed launch, in ms, the two alternating kernel by
kernel.

    python benchmarks/triton_check_cost.py [--repeats 3]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    import torch
    import triton_kernels as ex

    import cohort.triton as ct
    from cohort.triton import native

    with_detector = native.RaceCheck

    def timed(name: str, detector) -> float:
        native.RaceCheck = detector
        launch, _, _ = ex.CASES[name](torch.Generator().manual_seed(0))
        with ct.on_cpu(mode="check"):
            launch()
            times = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                launch()
                times.append(time.perf_counter() - t0)
        native.RaceCheck = with_detector
        return statistics.median(times) * 1e3

    print("| kernel | check mode ms | without the race detector ms | ratio |")
    print("|---|---:|---:|---:|")
    for name in ex.CASES:
        on, off = timed(name, with_detector), timed(name, lambda *args: None)
        print(f"| {name} | {on:.1f} | {off:.1f} | {on / off:.2f} |", flush=True)


if __name__ == "__main__":
    main()
