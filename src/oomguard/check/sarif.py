"""SARIF 2.1.0 output for code-scanning tools (GitHub code scanning, GitLab, IDEs).

One run, the driver ``oomguard`` with every registered rule (so that rule
metadata resolves even for rules that did not fire), one result per finding.
Levels map error → ``error``, warning → ``warning``, info → ``note``. Findings
without a file (a command given after ``--``) carry no location.
"""

from __future__ import annotations

from oomguard.check.finding import Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_HELP_BASE = "https://github.com/oomguard/oomguard/blob/main/docs/rules.md"


def _rule_entry(r) -> dict:
    return {
        "id": r.id,
        "name": r.name,
        "shortDescription": {"text": r.title},
        "fullDescription": {"text": r.why},
        "help": {"text": f"{r.why}\n\nFix: {r.fix_text}", "markdown": f"{r.why}\n\n**Fix:** {r.fix_text}"},
        "helpUri": f"{_HELP_BASE}#{r.id.lower()}-{r.name}",
        "defaultConfiguration": {"level": _LEVEL[r.severity]},
        "properties": {"family": r.family.title, "predicts": list(r.predicts)},
    }


def _uri(path: str) -> str:
    from pathlib import Path

    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(Path.cwd()).as_posix()
        except ValueError:
            return p.as_uri()
    return p.as_posix()


def to_sarif(report) -> dict:
    from oomguard import __version__
    from oomguard.check.registry import all_rules

    rules = all_rules()
    index = {r.id: i for i, r in enumerate(rules)}
    results = []
    for f in report.findings:
        res = {
            "ruleId": f.rule,
            "ruleIndex": index[f.rule],
            "level": _LEVEL[f.severity],
            "message": {"text": f.message},
            "properties": {"flags": list(f.flags), "fix": [e.to_dict() for e in f.fix], "numbers": dict(f.numbers)},
        }
        if f.file:
            loc = {"physicalLocation": {"artifactLocation": {"uri": _uri(f.file)}, "region": {"startLine": int(f.line or 1)}}}
            res["locations"] = [loc]
        results.append(res)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": {"name": "oomguard", "version": __version__, "informationUri": "https://github.com/oomguard/oomguard", "rules": [_rule_entry(r) for r in rules]}},
                "results": results,
                "properties": {"vllm_version": (report.ctx if hasattr(report, "ctx") else report.reports[0].ctx).release.version},
            }
        ],
    }
