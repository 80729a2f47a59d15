"""The 19-launch style table (issue 12): launches, releases, findings, false alarms, and whether the
corrected command is valid for the release.

    python benchmarks/launch_table.py [--json]

Launches live in tests/fixtures/launch/table/ (real-world styles: V0 entry points, --config YAML,
docker run, env-prefixed commands) plus the three founding scenarios; each row's ground truth
(``truth``: started, or the failure class) comes from the public record named in manifest.json.

Columns:
- findings: error / warning rule ids (OG001 = memory rules could not run);
- verdict: ``caught`` (a launch that failed got an error, or, for a run-time OOM, an error or a
  warning that foretells it), ``missed``, ``clean`` (started, no error or warning; OG001, the list of
  rules that could not run, is not an alarm), ``FALSE ALARM`` (started, but an error or a warning
  was reported), ``unverifiable`` (the record says it started without publishing its flags);
- corrected: the ``--fix`` text read back strictly by the release's own flag table, re-checked
  without errors and planned to start (``valid``), ``none`` when nothing was fixed, or what failed;
- goal: whether the corrected launch keeps the max-model-len asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tests" / "fixtures" / "launch" / "table"
sys.path.insert(0, str(ROOT / "src"))


def _foretells(finding, failure: str) -> bool:
    from oomguard.check.registry import get_rule

    r = get_rule(finding.rule)
    return r is not None and failure in r.predicts


def _validate_fix(rep, opts) -> str:
    """Read the corrected text back strictly for the release, re-check it, plan it."""
    from oomguard.check.report import check_read, reread
    from oomguard.errors import OomguardError
    from oomguard.inputs.reader import read_launch

    text = rep.fixed_text
    if text is None:
        return "none"
    suffix = Path(rep.ctx.launch.path or "x.sh").suffix or ".sh"
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as fh:
        fh.write(text)
        tmp = fh.name
    try:
        try:
            read_launch(tmp, version=rep.ctx.release.version, lenient=False)
        except OomguardError as exc:
            return f"rejected: {str(exc).split(': ', 1)[-1][:60]}"
        again = check_read(reread(rep.ctx.launch, text, opts.version), opts, fix=False)
        errs = [f.rule for f in again.errors]
        if errs:
            return "still " + ",".join(errs)
        plan = again.ctx.plan
        if plan is None:
            return "valid (not planned)"
        return "valid" if plan.starts else f"plans {plan.failure.value}"
    finally:
        os.unlink(tmp)


def run() -> list[dict]:
    from oomguard.check.context import CheckOptions
    from oomguard.check.report import check_target
    from oomguard.errors import OomguardError

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    manifest = json.loads((TABLE / "manifest.json").read_text())
    rows = []
    for e in manifest["launches"]:
        path = (TABLE / e["file"]).resolve()
        model = e.get("model")
        if model and model.startswith("."):
            model = str((TABLE / model).resolve())
        opts = CheckOptions(version=e.get("version"), model=model, gpu=e["gpu"], num_gpus=e.get("num_gpus"))
        t0 = time.perf_counter()
        try:
            rep = check_target(opts, path=str(path))
        except OomguardError as exc:
            rows.append({"launch": path.name, "error": str(exc)})
            continue
        dt = time.perf_counter() - t0
        truth = e["truth"]
        errors = [f.rule for f in rep.errors]
        warnings = [f.rule for f in rep.warnings]
        if truth == "starts" and e.get("flags_unknown"):
            # the record says it started but not with which flags: no verdict either way
            verdict = "unverifiable"
        elif truth == "starts":
            # the measure counts warnings too; OG001 (rules that could not run) is a coverage statement, not an alarm
            alarms = errors + [w for w in warnings if w != "OG001"]
            verdict = "FALSE ALARM" if alarms else "clean"
        elif truth == "runtime-oom":
            verdict = "caught" if errors or any(_foretells(f, truth) for f in rep.warnings) else "missed"
        else:
            verdict = "caught" if errors else "missed"
        plan = rep.ctx.plan
        asked = rep.ctx.flags.get("max_model_len")
        corrected = _validate_fix(rep, opts)
        kept = None
        if rep.fixed_text is not None and asked:
            fixed_read = rep.fix.text
            kept = f"--max-model-len {asked}" in fixed_read or f"max-model-len: {asked}" in fixed_read or f"max_model_len: {asked}" in fixed_read
        rows.append({
            "launch": path.parent.name + "/" + path.name if path.parent != TABLE else path.name,
            "style": rep.ctx.launch.kind + (" " + rep.ctx.launch.program.split()[0] if rep.ctx.launch.program else ""),
            "release": rep.ctx.release.version,
            "gpu": f"{plan.num_gpus if plan else (e.get('num_gpus') or 1)}x {e['gpu']}",
            "truth": truth,
            "predicted": ("starts" if plan.starts else plan.failure.value) if plan is not None else "not planned",
            "errors": errors,
            "warnings": warnings,
            "verdict": verdict,
            "corrected": corrected,
            "goal_kept": kept,
            "source": e["source"],
            "seconds": round(dt, 2),
        })
    return rows


def render(rows: list[dict]) -> str:
    out = ["| # | launch | style | release | GPUs | truth | plan | errors | warnings | verdict | corrected | goal |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        if "error" in r:
            out.append(f"| {i} | {r['launch']} | | | | | | | | input error: {r['error']} | | |")
            continue
        goal = "" if r["goal_kept"] is None else ("kept" if r["goal_kept"] else "lowered")
        out.append(
            f"| {i} | {r['launch']} | {r['style']} | {r['release']} | {r['gpu']} | {r['truth']} | {r['predicted']} | "
            f"{','.join(r['errors']) or '-'} | {','.join(r['warnings']) or '-'} | {r['verdict']} | {r['corrected']} | {goal} |"
        )
    ok = [r for r in rows if "error" not in r]
    failed = [r for r in ok if r["truth"] != "starts"]
    started = [r for r in ok if r["truth"] == "starts" and r["verdict"] != "unverifiable"]
    fixed = [r for r in ok if r["corrected"] != "none"]
    out.append("")
    out.append(
        f"{len(ok)} launches: {sum(r['verdict'] == 'caught' for r in failed)}/{len(failed)} real failures caught, "
        f"{sum(r['verdict'] == 'FALSE ALARM' for r in started)}/{len(started)} false alarms (errors or warnings) on launches that started "
        f"({sum(r['verdict'] == 'unverifiable' for r in ok)} unverifiable: flags not published), "
        f"{sum(r['corrected'] == 'valid' for r in fixed)}/{len(fixed)} corrected commands valid for their release, "
        f"{sum(1 for r in fixed if r['goal_kept'])}/{sum(1 for r in fixed if r['goal_kept'] is not None)} keep the asked max-model-len; "
        f"{sum(r['seconds'] for r in ok):.1f} s in all"
    )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = run()
    if a.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
