"""Writing a suite run to a directory: replay.json.gz, audit.json, tables.md, ratios.png."""
from __future__ import annotations

import gzip
import json
import os

from .tables import plot, render_markdown, render_notes

def write(directory: str, run) -> dict:
    os.makedirs(directory, exist_ok=True)
    paths = {k: os.path.join(directory, f) for k, f in
             (("replay", "replay.json.gz"), ("audit", "audit.json"), ("tables", "tables.md"),
              ("plot", "ratios.png"))}
    with gzip.open(paths["replay"], "wt") as f:
        json.dump(run.replay, f)
    with open(paths["audit"], "w") as f:
        json.dump(run.audit, f, indent=1)
    with open(paths["tables"], "w") as f:
        f.write(render_markdown(run.replay))
    paths["notes"] = os.path.join(directory, "notes.md")
    with open(paths["notes"], "w") as f:
        f.write(render_notes(run.replay))
    made = plot(run.replay, paths["plot"])
    if made != paths["plot"]:
        paths["plot_note"] = made
        paths.pop("plot")
    return paths


def tables_body(text: str) -> str:
    """tables.md without its two header comments (for printing)."""
    lines = text.splitlines(keepends=True)
    while lines and (lines[0].startswith("<!--") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines)
