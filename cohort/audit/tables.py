"""Tables (and the ratio plot) derived from a replay's raw samples alone.

Per case and column: the p50 of each round's samples, then the median over
rounds (DESIGN §7). Per ratio: the median over rounds of candidate/baseline
within the round, its min-max range, and the rounds the candidate won. A
column with any invalid round shows `invalid`; a column that could not run
shows `—`. Nothing is averaged across sizes.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np


def load_replay(path: str) -> dict:
    """A replay from disk, validated (validate.InvalidArtifact: the one-line reason)."""
    from . import validate
    return validate.replay(validate.read_json(path, "replay"))


def _usable(record: dict) -> bool:
    """A round counts only if it was valid and every sample is a time (a NaN, infinite,
    zero or negative sample makes the column `invalid`, never a number)."""
    from .validate import bad_samples
    return bool(record["valid"]) and not bad_samples(record["ns"])


def derive(replay: dict) -> list:
    by_case = defaultdict(lambda: defaultdict(list))
    for s in replay["samples"]:
        by_case[s["case"]][s["column"]].append(s)
    cells = []
    for case in replay["cases"]:
        cols = {}
        rounds = {}
        for name, info in case["columns"].items():
            recs = sorted(by_case[case["id"]].get(name, []), key=lambda r: r["round"])
            if info["status"] != "ok":
                cols[name] = {"status": "unavailable", "reason": info.get("reason", "")}
                continue
            if not recs or not all(_usable(r) for r in recs):
                cols[name] = {"status": "invalid"}
                continue
            figures = np.array([float(np.median(r["ns"])) for r in recs])
            rounds[name] = figures
            cols[name] = {"status": "ok", "us": float(np.median(figures)) / 1e3}
        ratios = []
        for r in case["ratios"]:
            c, b = r["candidate"], r["baseline"]
            if c in rounds and b in rounds:
                q = rounds[c] / rounds[b]
                ratios.append({**r, "status": "ok", "ratio": float(np.median(q)), "min": float(q.min()),
                               "max": float(q.max()), "won": int(np.sum(q < 1.0)), "rounds": int(len(q))})
            else:
                bad = [cols[x]["status"] for x in (c, b)]
                ratios.append({**r, "status": "invalid" if "invalid" in bad else "unavailable"})
        facts = {n: i.get("facts") or {} for n, i in case["columns"].items()}
        cells.append({"id": case["id"], "group": case["group"], "op": case["op"], "shape": case["shape"],
                      "size": "x".join(map(str, case["shape"])), "boundary": case["boundary"],
                      "columns": cols, "ratios": ratios, "facts": facts})
    return cells


def _fmt_us(col: dict) -> str:
    if col["status"] == "ok":
        us = col["us"]
        return f"{us:.3f}" if us < 1000 else f"{us:,.1f}"
    return "invalid" if col["status"] == "invalid" else "—"


def render_markdown(replay: dict) -> str:
    suite = replay["suite"]
    cells = derive(replay)
    out = [f"<!-- regenerate: {replay.get('command') or 'cohort bench ' + suite['name']} -->",
           "<!-- re-derive: cohort tables replay.json.gz; re-verify: cohort audit check . (in this directory) -->",
           "", f"# {suite['title']}", "",
           f"Boundary: {suite['boundary']}; {suite['rounds']} rounds of {suite['samples']} samples per column, "
           f"balanced orders; times are medians over rounds of each round's p50, in µs; ratios are medians of "
           f"per-round ratios (never ratios of medians), with their range over rounds and rounds won.",
           ""]
    if suite.get("notes"):
        out += [suite["notes"], ""]
    for group in suite["groups"]:
        rows = [c for c in cells if c["group"] == group["title"]]
        if not rows:
            continue
        names = [c["name"] for c in group["columns"]]
        head = ["op", "size"] + [f"{n} µs" for n in names]
        for r in group["ratios"]:
            head += [r["label"], "range", "won"]
        direct = suite["name"] == "e2e"
        if direct:
            head.append("direct CFG " + " → ".join(names))
        out += [f"## {group['title']}", "", "| " + " | ".join(head) + " |",
                "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|"]
        for c in rows:
            line = [c["op"], c["size"].replace("x", "×")] + [_fmt_us(c["columns"][n]) for n in names]
            for r in c["ratios"]:
                if r["status"] == "ok":
                    line += [f"{r['ratio']:.3f}", f"{r['min']:.3f}–{r['max']:.3f}", f"{r['won']}/{r['rounds']}"]
                else:
                    line += ["invalid" if r["status"] == "invalid" else "—", "", ""]
            if direct:
                line.append(" → ".join(str(c["facts"].get(n, {}).get("direct_cfg", "—")) for n in names))
            out.append("| " + " | ".join(line) + " |")
        missing = {n: c["columns"][n].get("reason") for c in rows for n in names
                   if c["columns"][n]["status"] == "unavailable"}
        for n, why in sorted(missing.items()):
            out.append(f"\n`—` {n}: {why}")
        for c in rows:    # a safe build whose launch could not be proven in bounds timed its checked build
            for n in names:
                if c["facts"].get(n, {}).get("fallback"):
                    out.append(f"\n{n} at {c['op']} {c['size']}: {c['facts'][n]['fallback']}")
        out.append("")
    if suite.get("roofline") and replay.get("machine"):
        out += render_roofline(replay, cells)
    return "\n".join(out)


def _fmt_bytes(n: int) -> str:
    return f"{n / 1e6:,.2f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


def render_roofline(replay: dict, cells: list) -> list:
    from .roofline import bounds
    m = replay["machine"]
    names = replay["suite"]["roofline"]
    lv = ", ".join(f"{k} {v['read']:.0f}/{v['gb_per_s']:.0f}" for k, v in m["levels"].items())
    peak = ", ".join(f"{k.replace('lanes', '')} lanes {v:.0f}" for k, v in m["flops_gflops"].items())
    out = ["## Roofline: against this machine's bounds", "",
           f"Measured at the start of this run, one thread: read/copy bandwidth per level in GB/s {lv} (copy: "
           f"the best of ordinary and non-temporal stores); peak float32 rate in GFLOP/s {peak} (independent "
           f"vector adds and multiplies). Memory bound (ANCHORS.md's): input plus output bytes at the copy "
           f"bandwidth of the smallest cache level holding them (a kernel reading more than it writes can beat a "
           f"copy a little inside the caches). Compute bound: the float32 operations the interpreter counts for "
           f"the launch "
           f"(+ − × ÷ √ min max of active threads, math functions included; compares, selects and integer work "
           f"left out) at the peak rate: the work of cohort's own definitions (Inductor evaluates other, "
           f"shorter approximations, so its compute figure here is only a yardstick). Bound = the larger; "
           f"time/bound = 1 is the physical limit.", ""]
    head = ["op", "size", "bytes", "FP ops", "level", "memory µs", "compute µs"]
    for n in names:
        head += [f"{n} µs", f"{n}/bound"]
    align = ["---"] * 2 + ["---:"] * 2 + ["---"] + ["---:"] * (len(head) - 5)
    out += ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    seen = set()
    by_size = {}
    for c in cells:
        by_size.setdefault((c["op"], c["size"]), []).append(c)
    for case in replay["cases"]:
        key = (case["op"], "x".join(map(str, case["shape"])))
        if key in seen or "work" not in case:
            continue
        seen.add(key)
        w = case["work"]
        b = bounds(w, m)
        line = [case["op"], key[1].replace("x", "×"), _fmt_bytes(w["bytes"]), f"{w['flops']:,}", b["level"],
                f"{b['memory_us']:.3f}" if b["memory_us"] < 1000 else f"{b['memory_us']:,.1f}",
                f"{b['compute_us']:.3f}" if b["compute_us"] < 1000 else f"{b['compute_us']:,.1f}"]
        for n in names:
            col = next((c["columns"][n] for c in by_size[key] if n in c["columns"]), {"status": "unavailable"})
            line += [_fmt_us(col), f"{col['us'] / b['bound_us']:.2f}" if col["status"] == "ok" else "—"]
        out.append("| " + " | ".join(line) + " |")
    out.append("")
    return out


def plot(replay: dict, path: str) -> str:
    """A PNG of each group's first ratio per case (log scale, 1.0 marked); '' if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install matplotlib)"
    cells = derive(replay)
    groups = replay["suite"]["groups"]
    most = max(sum(1 for c in cells if c["group"] == g["title"]) for g in groups)
    fig, axes = plt.subplots(len(groups), 1, figsize=(min(18, max(8, 0.22 * most + 3)), 4.2 * len(groups)),
                             squeeze=False)
    for ax, group in zip(axes[:, 0], groups):
        rows = [c for c in cells if c["group"] == group["title"] and c["ratios"]]
        label = group["ratios"][0]["label"] if group["ratios"] else ""
        xs, ys, lo, hi, names = [], [], [], [], []
        for i, c in enumerate(rows):
            r = c["ratios"][0]
            names.append(f"{c['op']} {c['size']}")
            if r["status"] == "ok":
                xs.append(i)
                ys.append(r["ratio"])
                lo.append(r["ratio"] - r["min"])
                hi.append(r["max"] - r["ratio"])
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3)
        ax.axhline(1.0, color="grey", lw=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=80, ha="right", fontsize=6)
        ax.set_ylabel(label + " (log)")
        ax.set_title(f"{replay['suite']['title']} — {group['title']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def json_cells(replay: dict) -> list:
    """The cells of `cohort bench --json`: op, size, every column's µs, every ratio."""
    out = []
    for c in derive(replay):
        out.append({"group": c["group"], "op": c["op"], "size": c["size"],
                    "columns": {n: (v["us"] if v["status"] == "ok" else v["status"]) for n, v in c["columns"].items()},
                    "ratios": [{k: r.get(k) for k in ("label", "status", "ratio", "min", "max", "won", "rounds")}
                               for r in c["ratios"]]})
    return out
