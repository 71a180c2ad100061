"""A campaign's durable state: `cohort fuzz --campaign DIR`.

    DIR/campaign.json     what a seed means here (base seed, variant matrix, generator
                          settings, injected bugs); written once, checked on every resume
    DIR/log.jsonl         append-only, one JSON entry per line, flushed and fsync'ed:
                          {"type": "seed", ...}     a finished seed: its Tally, worker, time
                          {"type": "failure", ...}  a failing variant run, with the whole case,
                                                    written as soon as it is known
                          {"type": "shrunk", ...}   the minimal kernel of a failure bin
    DIR/mismatches/BIN.json  one replayable corpus case per failure bin (the found case,
                          replaced by its shrunk kernel once shrunk)
    DIR/summary.json      the last run's report (written atomically)

A seed is one Hypothesis run of `examples_per_seed` programs, seeded by
`seed_value(base, index)`: the same seed gives the same programs in every
process, so a seed finished anywhere (a local run, a Dask worker) is never run
again, and two campaigns over disjoint seeds merge into one. Failures are
binned by their checksum-bin signature (kind, and which variants disagree with
the reference: YARPGen's bins across programs), so one bug found a hundred
times is shrunk once. A line torn by a crash is dropped on the next start
(its seed is run again); every other file is replaced atomically.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os

from ..files import naming, write_atomic
from .tally import Tally

FORMAT = "cohort-campaign/1"
MEANING = ("variants", "max_stmts", "examples_per_seed", "bugs", "variants_per_program")    # what the programs of a seed are
SEED_STRIDE = 1_000_003


class CampaignError(ValueError):
    """A campaign directory that cannot be used as asked (the message says why)."""


def seed_value(base: int, index: int) -> int:
    """The Hypothesis seed of a campaign's index-th seed (as the local campaign has always drawn them)."""
    return (base * SEED_STRIDE + index) % (2 ** 63)


def failure_bin(kind: str, failing_variants) -> str:
    text = kind + "\n" + "\n".join(sorted(failing_variants))
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def write_json_atomic(path: str, doc) -> None:
    """`doc` as `path`, whole or not at all (a failed write leaves no temporary file)."""
    def write(f):
        json.dump(doc, f, indent=1)
        f.write("\n")
    write_atomic(path, write)


def _read_log(path: str) -> tuple:
    """(entries, torn): every complete entry; torn if the last line was cut short."""
    entries, torn = [], False
    if not os.path.exists(path):
        return entries, torn
    with open(path, "rb") as f:
        data = f.read()
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except ValueError:
            torn = True
            break
    return entries, torn


class CampaignState:
    def __init__(self, directory: str, config: dict, resume_only: bool = False):
        self.dir = directory
        self.config_path = os.path.join(directory, "campaign.json")
        self.log_path = os.path.join(directory, "log.jsonl")
        self.cases_dir = os.path.join(directory, "mismatches")
        config = {"format": FORMAT, **config}
        if os.path.exists(self.config_path):
            try:
                with open(self.config_path) as f:
                    saved = json.load(f)
            except (OSError, ValueError) as e:
                raise CampaignError(f"{directory}: unreadable campaign.json ({e})") from None
            if saved.get("format") != FORMAT:
                raise CampaignError(f"{directory}: not a {FORMAT} campaign")
            for key in ("seed",) + MEANING:
                if key in config and _norm(saved.get(key)) != _norm(config[key]):
                    raise CampaignError(f"{directory} holds a campaign with {key}={saved.get(key)!r}, "
                                        f"not {config[key]!r}: use another directory")
            self.config = saved
        elif resume_only:
            raise CampaignError(f"{directory}: no campaign here")
        else:
            os.makedirs(directory, exist_ok=True)
            write_json_atomic(self.config_path, config)
            self.config = config
        self.total = Tally()
        self.done: dict = {}            # seed value -> index
        self.keys: set = set()          # programs run (case_key prefixes)
        self.failures: dict = {}        # failure id -> entry
        self.shrunk: dict = {}          # bin -> entry
        self.workers: dict = {}         # worker -> {"seeds", "programs", "seconds"}
        entries, torn = _read_log(self.log_path)
        if torn:                        # drop the torn tail before appending after it
            write_atomic(self.log_path, lambda f: f.writelines(json.dumps(e, separators=(",", ":")) + "\n"
                                                               for e in entries))
        for e in entries:
            self._fold(e)
        self.log = open(self.log_path, "ab", buffering=0)   # unbuffered: nothing pending at close

    # ------------------------------------------------------------ entries
    def _fold(self, e: dict):
        kind = e.get("type")
        if kind == "seed":
            if e["seed"] in self.done:
                return
            self.done[e["seed"]] = e.get("index")
            t = Tally.from_json(e["tally"])
            self.total.add(t)
            self.keys.update(t.keys)
            w = self.workers.setdefault(e.get("worker", "?"), {"seeds": 0, "programs": 0, "seconds": 0.0})
            w["seeds"] += 1
            w["programs"] += t.programs
            w["seconds"] = round(w["seconds"] + t.seconds, 3)
        elif kind == "failure":
            self.failures.setdefault(e["id"], e)
        elif kind == "shrunk":
            self.shrunk[e["bin"]] = e

    def _append(self, e: dict):
        """One line, whole or not at all: a failed write (a full disk) is cut off again."""
        data = memoryview((json.dumps(e, separators=(",", ":")) + "\n").encode())
        end = self.log.seek(0, os.SEEK_END)
        try:
            with naming(self.log_path):
                while data:
                    data = data[self.log.write(data):]
                os.fsync(self.log.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self.log.fileno(), end)
            raise
        self._fold(e)

    def is_done(self, seed: int) -> bool:
        return seed in self.done

    def commit_seed(self, seed: int, index, tally: Tally, worker: str):
        if seed not in self.done:
            self._append({"type": "seed", "seed": seed, "index": index, "worker": worker, "tally": tally.to_json()})

    def add_failure(self, record: dict) -> tuple:
        """Keep a failure (with its case) now; returns (bin, first of its bin?)."""
        fid = f"{record['key'][:16]}:{record['variant']}"
        if fid in self.failures:          # found again (a seed run again after a stop)
            return self.failures[fid]["bin"], False
        b = failure_bin(record["kind"], record["failing_variants"])
        first = not any(f["bin"] == b for f in self.failures.values())
        self._append({"type": "failure", "id": fid, "bin": b, **record})
        if first and record.get("case") is not None:
            self._save_case(b, record)
        return b, first

    def add_shrunk(self, b: str, record: dict):
        self._append({"type": "shrunk", "bin": b, **record})
        self._save_case(b, record)

    def _save_case(self, b: str, record: dict):
        from .. import corpus
        case = corpus.case_from_json(record["case"])
        found = {k: record.get(k) for k in ("kind", "variant", "description", "failing_variants", "seed", "shrunk")}
        record["case_file"] = corpus.save_case(self.cases_dir, case, name=b, variants=record["failing_variants"],
                                               expected="agree", note=f"campaign {self.dir}", found=found)

    def bins(self) -> dict:
        """bin -> {"count", "first": failure entry, "shrunk": entry or None}."""
        out = {}
        for f in self.failures.values():
            b = out.setdefault(f["bin"], {"count": 0, "first": f, "shrunk": self.shrunk.get(f["bin"])})
            b["count"] += 1
        return out

    def pending_shrinks(self) -> list:
        return [b["first"] for name, b in self.bins().items() if b["shrunk"] is None]

    def write_summary(self, report: dict):
        write_json_atomic(os.path.join(self.dir, "summary.json"), report)

    def close(self):
        if not self.log.closed:
            self.log.close()


def _norm(v):
    return list(v) if isinstance(v, tuple) else v


def merge(sources: list, target: str) -> CampaignState:
    """One campaign from several over disjoint seeds (same variants, generator settings, bugs)."""
    if os.path.exists(os.path.join(target, "campaign.json")):
        raise CampaignError(f"{target}: already holds a campaign; merge into a new directory")
    states = [CampaignState(s, {}, resume_only=True) for s in sources]
    try:
        first = states[0].config
        for s in states[1:]:
            for key in MEANING:
                if _norm(s.config.get(key)) != _norm(first.get(key)):
                    raise CampaignError(f"cannot merge {s.dir} into {states[0].dir}: {key} differs "
                                        f"({s.config.get(key)!r} vs {first.get(key)!r})")
        seen: dict = {}
        for s in states:
            for seed in s.done:
                if seed in seen:
                    raise CampaignError(f"cannot merge: seed {seed} was run by both {seen[seed]} and {s.dir}")
                seen[seed] = s.dir
        config = {k: v for k, v in first.items() if k != "format"}
        config["merged_from"] = [os.path.abspath(s.dir) for s in states]
        out = CampaignState(target, config)
        for s in states:
            entries, _ = _read_log(s.log_path)
            for e in entries:
                out._append(e)
        for b in out.bins().values():      # each bin's case: its shrunk kernel if any campaign has one
            out._save_case(b["first"]["bin"], b["shrunk"] or b["first"])
        return out
    finally:
        for s in states:
            s.close()
