"""Tables (and the ratio plot) derived from a replay's raw samples alone.

Per case and column: the p50 of each round's samples, then the median over
rounds (DESIGN §7). Per ratio: the median over rounds of candidate/baseline
within the round, its min-max range, and the rounds the candidate won. A
column with any invalid round shows `invalid`; a column that could not run
shows `—`. Nothing is averaged across sizes. Every ratio is read against the
case's A/A control; a replay whose ratio compares sides timed with unequal
calls per sample is rejected (ReplayError), not tabulated.
"""
from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from ..backend.launch_policy import is_auto
from ..backend.variant import AUTO_GRAINS

# a case's form_note for a Group.by_width group: the form each cohort column ran in (harness.py)
BY_WIDTH = "by width: "


def load_replay(path: str) -> dict:
    """A replay from disk, validated (validate.InvalidArtifact: the one-line reason)."""
    from . import validate
    return validate.replay(validate.read_json(path, "replay"))


def _usable(record: dict) -> bool:
    """A round counts only if it was valid and every sample is a time (a NaN, infinite,
    zero or negative sample makes the column `invalid`, never a number)."""
    from .validate import bad_samples
    return bool(record["valid"]) and not bad_samples(record["ns"])


class ReplayError(ValueError):
    """A replay whose tables cannot be derived honestly (the reason names the case)."""


def overlaps(r: dict, aa: dict) -> bool:
    return r["min"] <= aa["max"] and aa["min"] <= r["max"]


def stable(r: dict, aa) -> bool:
    """Seed 000's rule: a ratio is a stable difference only if its range over rounds is clear of
    the A/A control's range (its case's: the same design and rounds) and its rounds all go one
    way (none on the other side of 1)."""
    if r["min"] < 1.0 < r["max"]:
        return False
    if aa is None:
        return True
    # A and A' are interchangeable, so the floor is the A/A range together with its reciprocal
    floor = {"min": min(aa["min"], 1.0 / aa["max"]), "max": max(aa["max"], 1.0 / aa["min"])}
    return not overlaps(r, floor)


def _grain_of(info: dict):
    name = info.get("variant") or ""
    return next((p.split("=", 1)[1] for p in name.split(",") if p.startswith("grain=")), None)


def same_build(case: dict, a: str, b: str) -> bool:
    """Columns a and b ran byte-identical code under the same grain policy: an A/A in all but name."""
    ia, ib = case["columns"].get(a, {}), case["columns"].get(b, {})
    g = _grain_of(ia)
    return bool(ia.get("code_digest")) and ia.get("code_digest") == ib.get("code_digest") and \
        g == _grain_of(ib) and g not in AUTO_GRAINS


def derive(replay: dict) -> list:
    by_case = defaultdict(lambda: defaultdict(list))
    for s in replay["samples"]:
        by_case[s["case"]][s["column"]].append(s)
    cells = []
    for case in replay["cases"]:
        cols = {}
        rounds = {}
        choices = {}
        checksums = {}
        for name, info in case["columns"].items():
            recs = sorted(by_case[case["id"]].get(name, []), key=lambda r: r["round"])
            if info["status"] != "ok":
                cols[name] = {"status": "unavailable", "reason": info.get("reason", "")}
                continue
            if any("choice" in r for r in recs):
                choices[name] = [r.get("choice") for r in recs]
            checksums[name] = [r.get("output_checksum") for r in recs]
            if not recs or not all(_usable(r) for r in recs):
                cols[name] = {"status": "invalid"}
                continue
            figures = np.array([float(np.median(r["ns"])) for r in recs])
            rounds[name] = figures
            cols[name] = {"status": "ok", "us": float(np.median(figures)) / 1e3}
        ratios = []
        for r in case["ratios"]:
            c, peers = r["candidate"], r["baseline"].split("|")
            ran = [b for b in peers if b in rounds]   # "a|b": the better of a and b, round by round
            if c in rounds and ran:
                for b in ran:
                    ic, ib = case["columns"][c].get("iters"), case["columns"][b].get("iters")
                    if ic is None or ic != ib:
                        raise ReplayError(f"{case['id']}: {r['label']} compares {c} at {ic} calls per sample "
                                          f"with {b} at {ib}; both sides of a ratio must make the same calls "
                                          f"per sample")
                    if len(rounds[c]) != len(rounds[b]):
                        raise ReplayError(f"{case['id']}: {r['label']}: {c} has {len(rounds[c])} rounds, "
                                          f"{b} {len(rounds[b])}")
                best = np.min([rounds[b] for b in ran], axis=0)
                q = rounds[c] / best
                extra = {"peers": ran} if len(peers) > 1 else {}
                ratios.append({**r, "status": "ok", "ratio": float(np.median(q)), "min": float(q.min()),
                               "max": float(q.max()), "won": int(np.sum(q < 1.0)), "rounds": int(len(q)), **extra})
            else:
                bad = [cols[x]["status"] for x in (c, *peers)]
                ratios.append({**r, "status": "invalid" if "invalid" in bad else "unavailable"})
        facts = {n: i.get("facts") or {} for n, i in case["columns"].items()}
        cells.append({"id": case["id"], "group": case["group"], "op": case["op"], "shape": case["shape"],
                      "size": "x".join(map(str, case["shape"])), "boundary": case["boundary"],
                      "form": case.get("form", "stream"), "form_note": case.get("form_note", ""),
                      "rounds_timed": case.get("rounds"), "columns": cols, "ratios": ratios, "facts": facts,
                      "choices": choices, "checksums": checksums,
                      "digests": {n: i.get("code_digest") for n, i in case["columns"].items()
                                  if i["status"] == "ok"}})
    for c, case in zip(cells, replay["cases"]):   # each ratio against its own case's A/A control
        aa = next((r for r in c["ratios"] if r.get("control") and r["status"] == "ok"), None)
        for r in c["ratios"]:
            if r["status"] == "ok" and not r.get("control"):
                r["same_build"] = same_build(case, r["candidate"], r["baseline"])
                r["stable"] = stable(r, aa) and not r["same_build"]
    return cells


def group_control_range(rows: list):
    """The A/A control's min-max over a group's cases and rounds (None if it was not timed)."""
    aa = [r for c in rows for r in c["ratios"] if r.get("control") and r["status"] == "ok"]
    if not aa:
        return None
    return {"min": min(r["min"] for r in aa), "max": max(r["max"] for r in aa), "label": aa[0]["label"]}


def _fmt_us(col: dict) -> str:
    if col["status"] == "ok":
        us = col["us"]
        return f"{us:.3f}" if us < 1000 else f"{us:,.1f}"
    return "invalid" if col["status"] == "invalid" else "—"


def _auto_columns(group: dict) -> list:
    return [c["name"] for c in group["columns"]
            if c["kind"] == "variant" and is_auto(c["spec"])]


def _summary(choices: list) -> str:
    counts = Counter(c for c in choices if c)
    return "; ".join(f"{k} ×{v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "—"


def _header(replay: dict, cells: list) -> list:
    suite = replay["suite"]
    b = suite["boundary"]
    what = {"native_entry": "the compiled entry called in a native timing loop, one thread",
            "runtime_e2e": "the runtime's native launch entry (tasks cut by the grain policy, the worker pool, "
                           "the wait) called in the same native timing loop, no Python between launches",
            "python_api": "CompiledKernel.launch called from a Python loop (not the seeds' runtime E2E)",
            "torch_api": "one Python call per op on torch tensors, as a PyTorch user makes it (cohort.torch, "
                         "eager torch, the torch.compile'd function), each call returning a new tensor, "
                         "in a Python loop"}.get(b, b)
    out = [f"Boundary: {b} — {what}. Every number below is at this boundary only."]
    host = (replay.get("environment") or {}).get("host") or {}
    if host.get("isa"):        # replays written before targets were recorded have no such line
        os_name = {"linux": "Linux", "darwin": "macOS"}.get(host.get("os"), host.get("os"))
        out.append(f"Target: {host['isa']} {os_name}, {host.get('vector_isa')} "
                   f"({host.get('vector_bits')}-bit vector registers), CPU {host.get('cpu')}.")
    workers = suite.get("workers", 1)
    cores = suite.get("cores")
    if b != "native_entry":
        line = f"Workers: {workers} requested"
        if cores:
            line += f" on a machine with {cores} cores"
            if suite.get("oversubscribed"):
                line += f" — oversubscribed: {workers} threads share {cores} cores"
        if suite.get("pool_host") == "openmp":
            line += ("; cohort's launches ran on the process's OpenMP team, as ATen's do (runtime.pool_host: "
                     "a second pool beside ATen's spinning threads loses its core)")
        elif suite.get("pool_host"):
            line += "; cohort's launches ran on its own worker pool"
        out.append(line + ".")
    else:
        out.append("Workers: 1 (single thread)." + (f" Machine cores: {cores}." if cores else ""))
    design = suite.get("design", "balanced")
    dtext = ("an order and its reverse per pair of rounds (the seeds' reversed orders; every column's mean "
             "position equal, rotations over 2k rounds)" if design == "reversed" else
             "complete balanced designs (all orders for 2-3 columns, Williams designs for 4 or more: every "
             "column in every position, every ordered pair adjacent, equally often)")
    timed = sorted({c["rounds_timed"] for c in cells if c.get("rounds_timed")})
    rline = f"Rounds: {suite['rounds']} requested, {suite['samples']} samples per column per round; {dtext}."
    if timed and timed != [suite["rounds"]]:
        rline += (f" Rounded up to complete designs: {', '.join(map(str, timed))} rounds timed "
                  f"(per group below).")
    out.append(rline)
    out.append("Times are medians over rounds of each round's p50, in µs; ratios are medians of per-round ratios "
               "(never ratios of medians), with their min–max range over rounds and rounds won. A ratio is a "
               "stable difference only if its range is clear of its case's A/A range (the A/A columns of its row, "
               "taken with its reciprocal: A and A' are interchangeable) and does not straddle 1, and its two "
               "sides did not run the same code under the same grain; "
               "otherwise it is marked \"no stable difference\".")
    if suite.get("calls_per_sample"):
        out.append(f"Calls per sample: {suite['calls_per_sample']}.")
    return [" ".join(out), ""]


def _facts_lines(group: dict, rows: list) -> list:
    """Which columns ran byte-identical code, and whether their outputs were identical, from the
    code digests and the output checksums recorded after every round."""
    auto = set(_auto_columns(group))
    names = [c["name"] for c in group["columns"] if c["kind"] == "variant" and c["name"] not in auto]
    if len(names) < 2:
        return []
    parts = Counter()
    for c in rows:
        by = defaultdict(list)
        for n in names:
            if c["digests"].get(n):
                by[c["digests"][n]].append(n)
        parts[tuple(sorted(tuple(v) for v in by.values()))] += 1
    out = []
    if len(parts) == 1:
        (part, n), = parts.items()
        same = [p for p in part if len(p) > 1]
        text = "; ".join("{" + ", ".join(p) + "}" for p in same) if same else "none"
        out.append(f"Code (LLVM IR digests of the builds that ran): identical within {text} in all {n} cases"
                   + ("" if all(len(p) > 1 for p in part) else
                      "; the other columns each ran their own code") + ".")
    else:
        out.append("Code (LLVM IR digests): the columns sharing code differ between cases: " + "; ".join(
            f"{n} case(s): " + " | ".join(",".join(p) for p in part) for part, n in parts.items()) + ".")
    same_out = sum(1 for c in rows if len({x for n in names for x in c["checksums"].get(n, []) if x}) == 1)
    checked = sum(1 for c in rows if any(c["checksums"].get(n) for n in names))
    if checked:
        where = [f"{c['op']} {c['size']}" for c in rows
                 if len({x for n in names for x in c["checksums"].get(n, []) if x}) > 1]
        out.append(f"Outputs: the checksum recorded after every round is the same for {', '.join(names)} in "
                   f"{same_out} of {checked} cases" + (f" (not in: {', '.join(where)})" if where else "") + ".")
    if auto:
        out.append(f"{', '.join(sorted(auto))}: chose per round (below); the code they ran is named by their "
                   f"choice (lanes=1 is the whole build).")
    return out


def render_markdown(replay: dict) -> str:
    suite = replay["suite"]
    cells = derive(replay)
    out = [f"<!-- regenerate: {replay.get('command') or 'cohort bench ' + suite['name']} -->",
           "<!-- re-derive: cohort tables replay.json.gz; re-verify: cohort audit check . (in this directory) -->",
           "", f"# {suite['title']}", ""]
    out += _header(replay, cells)
    if suite.get("notes"):
        out += [suite["notes"], ""]
    if suite.get("strategies"):
        out += ["Candidate strategies: see notes.md.", ""]
    for group in suite["groups"]:
        rows = [c for c in cells if c["group"] == group["title"]]
        if not rows:
            continue
        names = [c["name"] for c in group["columns"]]
        auto = _auto_columns(group)
        head = ["op", "size"] + [f"{n} µs" for n in names]
        for r in group["ratios"]:
            head += [r["label"], "range", "won"] + ([] if r.get("control") else ["vs A/A"])
        for n in auto:
            head.append(f"{n} chose")
        direct = suite["name"] == "e2e"
        if direct:
            head.append("direct CFG " + " → ".join(names))
        out += [f"## {group['title']}", ""]
        by_width = [c for c in rows if c["form_note"].startswith(BY_WIDTH)]
        forms = Counter((c["form"], c["form_note"]) for c in rows if c not in by_width)
        ftext = "; ".join(f"{f}" + (f" ({', '.join(sorted({c['op'] for c in rows if c['form'] == f}))}: {note})"
                                    if note else "") for f, note in forms)
        if by_width:
            ftext += ("; " if ftext else "") + (
                f"{', '.join(sorted({c['op'] for c in by_width}))}: each cohort column in the form cohort.torch "
                f"picks for its lanes on this machine (named below the table)")
        out.append(f"Operator form: {ftext}. Rounds timed: "
                   f"{', '.join(map(str, sorted({c['rounds_timed'] for c in rows if c.get('rounds_timed')}))) or '—'}.")
        aa = group_control_range(rows)
        if aa:
            out.append(f"A/A control ({aa['label']}: the same build timed twice in the same design): range "
                       f"{aa['min']:.3f}–{aa['max']:.3f} over this group's cases and rounds; each ratio is read "
                       f"against its own case's A/A range (its row), overlapping it: \"no stable difference\".")
        out += _facts_lines(group, rows)
        out += ["", "| " + " | ".join(head) + " |",
                "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2)) + "|"]
        for c in rows:
            line = [c["op"], c["size"].replace("x", "×")] + [_fmt_us(c["columns"][n]) for n in names]
            for r in c["ratios"]:
                if r["status"] == "ok":
                    partial = "peers" in r and len(r["peers"]) < len(r["baseline"].split("|"))
                    line += [f"{r['ratio']:.3f}" + (f" (vs {', '.join(r['peers'])} only)" if partial else ""),
                             f"{r['min']:.3f}–{r['max']:.3f}", f"{r['won']}/{r['rounds']}"]
                    if not r.get("control"):
                        line.append("no stable difference (same code, same grain)" if r["same_build"] else
                                    "stable" if r["stable"] else "no stable difference")
                else:
                    line += ["invalid" if r["status"] == "invalid" else "—", "", ""]
                    if not r.get("control"):
                        line.append("")
            for n in auto:
                line.append(_summary(c["choices"].get(n, [])))
            if direct:
                line.append(" → ".join(str(c["facts"].get(n, {}).get("direct_cfg", "—")) for n in names))
            out.append("| " + " | ".join(line) + " |")
        if by_width:
            out += ["", "Forms by width (the reference checksum is the interpreter's in the operator's own "
                        "form; every form gives the same bits):", ""]
            out += [f"- {c['op']} {c['size'].replace('x', '×')}: {c['form_note'][len(BY_WIDTH):]}"
                    for c in by_width]
        missing = {n: c["columns"][n].get("reason") for c in rows for n in names
                   if c["columns"][n]["status"] == "unavailable"}
        for n, why in sorted(missing.items()):
            out.append(f"\n`—` {n}: {why}")
        for c in rows:    # a safe build whose launch could not be proven in bounds timed its checked build
            for n in names:
                if c["facts"].get(n, {}).get("fallback"):
                    out.append(f"\n{n} at {c['op']} {c['size']}: {c['facts'][n]['fallback']}")
        if auto and any(c["choices"] for c in rows):
            most = max(len(v) for c in rows for v in c["choices"].values())
            out += ["", f"What {', '.join(auto)} chose, round by round (lanes, and caller or the grain in blocks "
                        f"per task):", "",
                    "| op | size | column | " + " | ".join(f"r{i}" for i in range(most)) + " |",
                    "|---|---|---|" + "---|" * most]
            for c in rows:
                for n in auto:
                    ch = c["choices"].get(n)
                    if ch:
                        out.append(f"| {c['op']} | {c['size'].replace('x', '×')} | {n} | "
                                   + " | ".join(x or "—" for x in ch) + " |")
        out.append("")
    if suite.get("roofline") and replay.get("machine"):
        out += render_roofline(replay, cells)
    return "\n".join(out)


def render_notes(replay: dict) -> str:
    """notes.md: what each column's strategy does (the seeds' "candidate strategies, see notes.md")."""
    suite = replay["suite"]
    out = [f"# {suite['title']}: candidate strategies", ""]
    described = dict((k, v) for k, v in suite.get("strategies", []))
    for group in suite["groups"]:
        out += [f"## {group['title']}", "", f"Operator form: {group.get('form', 'stream')}.", ""]
        for c in group["columns"]:
            text = described.get(c["name"])
            if c["name"].endswith("'") and c["name"][:-1] == group.get("control"):
                text = f"the A/A control: {c['name'][:-1]} timed a second time in the same design (same code)"
            spec = f"`{c['spec']}`" if c["spec"] else "—"
            out.append(f"- **{c['name']}** ({c['kind']}, {spec}): {text or 'the variant as spelled'}")
        out.append("")
    if suite.get("notes"):
        out += [suite["notes"], ""]
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
           f"vector adds and multiplies). Memory bound (DESIGN §7): input plus output bytes at the copy "
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
    """A PNG per group of every ratio of its table, per case: the dot is the median over rounds, the bar
    the min-max over rounds (log scale, 1.0 marked); a note instead if matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plot skipped: matplotlib is not installed (pip install matplotlib)"
    cells = derive(replay)
    groups = [g for g in replay["suite"]["groups"] if any(c["group"] == g["title"] for c in cells)]
    if not groups:
        return "plot skipped: no case was timed"
    most = max(sum(1 for c in cells if c["group"] == g["title"]) for g in groups)
    fig, axes = plt.subplots(len(groups), 1, figsize=(min(18, max(8, 0.3 * most + 4)), 4.4 * len(groups)),
                             squeeze=False)
    for ax, group in zip(axes[:, 0], groups):
        rows = [c for c in cells if c["group"] == group["title"]]
        k = max(1, len(group["ratios"]))
        width = 0.8 / k
        for j, ratio in enumerate(group["ratios"]):
            xs, ys, lo, hi = [], [], [], []
            for i, c in enumerate(rows):
                r = c["ratios"][j]
                if r["status"] == "ok":
                    xs.append(i - 0.4 + width * (j + 0.5))
                    ys.append(r["ratio"])
                    lo.append(r["ratio"] - r["min"])
                    hi.append(r["max"] - r["ratio"])
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt="s" if ratio.get("control") else "o", capsize=3,
                        label=ratio["label"], color="grey" if ratio.get("control") else None)
        ax.axhline(1.0, color="grey", lw=1)
        ax.set_yscale("log")
        ax.set_xlim(-0.6, len(rows) - 0.4)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels([f"{c['op']} {c['size']}" for c in rows], rotation=80, ha="right", fontsize=6)
        ax.set_ylabel("ratio (log)")
        ax.legend(fontsize=7)
        ax.set_title(f"{replay['suite']['title']} — {group['title']}: median over rounds, bars = min–max over "
                     f"rounds ({replay['suite']['boundary']})", fontsize=9)
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
                    "form": c["form"], "choices": c["choices"],
                    "ratios": [{k: r.get(k) for k in ("label", "status", "ratio", "min", "max", "won", "rounds",
                                                      "control", "stable")}
                               for r in c["ratios"]]})
    return out
