"""Write tests/fixtures/calibrate/ from the public start-up corpus (tests/data/calibration/startup.jsonl).

The memory lines are the records' own (``raw_excerpt``, verbatim where the source printed a log;
in vLLM's line formats of the release where it quoted the values in a table). The identity lines
a start-up begins with (``vLLM API server version``, ``non-default args``) were cut from most
excerpts (or cut off mid-way): they are rebuilt from the record's stated inputs, the same way
benchmarks/calibration_cv.py does. Three shapes of input, as teams have them:

- ``a100-restarts.log``: one pod's ``kubectl logs`` over five restarts (S100-S103, S105: A100 80 GB, vLLM 0.10.1.1);
- ``h100-loki.jsonl``: a Loki export (``logcli query --output=jsonl``, newest first) of two replicas,
  ``vllm-0`` and ``vllm-1``, with the H100 start-ups S110-S119 (vLLM 0.11, DEBUG ledger values);
- ``rtx3090-v0.log.gz``: gzip, V0 lines without prefixes and without a version (S001, S002).

    python scripts/gen_calibrate_fixtures.py
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibration as corpus  # noqa: E402
import calibration_cv as cv  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "calibrate"


def _records() -> dict:
    return {r["id"]: r for r in (json.loads(x) for x in corpus.DATA.read_text().splitlines() if x.strip())}


def main() -> int:
    recs = _records()
    models: dict = {}
    OUT.mkdir(parents=True, exist_ok=True)
    # one pod, five start-ups
    parts = []
    for rid in ("S100", "S101", "S102", "S103", "S105"):
        inp, why = corpus.prepare(recs[rid], models)
        assert inp is not None, (rid, why)
        parts.append(cv.log_text(recs[rid], inp)[0])
    (OUT / "a100-restarts.log").write_text("".join(parts))
    # two replicas in a Loki export, newest first
    rows = []
    t = 1_735_000_000_000_000_000
    for i, rid in enumerate(("S110", "S112", "S113", "S114", "S115", "S116", "S117", "S119", "S133")):
        inp, why = corpus.prepare(recs[rid], models)
        if inp is None:
            continue
        pod = f"vllm-{i % 2}"
        for line in cv.log_text(recs[rid], inp)[0].splitlines():
            t += 1_000_000_000
            rows.append({"labels": {"app": "vllm", "pod": pod, "namespace": "serving"}, "line": line,
                         "timestamp": f"{t}"})
    rows.reverse()
    (OUT / "h100-loki.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # V0 without version or prefix, gzip
    text = "".join(str(recs[rid]["raw_excerpt"]).rstrip("\n") + "\n" for rid in ("S001", "S002"))
    with gzip.open(OUT / "rtx3090-v0.log.gz", "wt") as f:
        f.write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
