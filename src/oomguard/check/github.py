"""GitHub Actions workflow commands: one ``::error`` / ``::warning`` / ``::notice`` line per finding.

    ::error file=start_api.sh,line=5,title=OG101 batched-tokens-at-long-context::message

Property values escape ``%``, CR, LF, ``:`` and ``,``; messages escape ``%``,
CR and LF (the runner's own rules), so a message can never end the command early.
"""

from __future__ import annotations

from oomguard.check.finding import Severity

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(report) -> str:
    lines = []
    for f in report.findings:
        props = []
        if f.file:
            props.append(f"file={escape_property(f.file)}")
            if f.line:
                props.append(f"line={int(f.line)}")
        props.append(f"title={escape_property(f'{f.rule} {f.name}')}")
        fix = ""
        if f.fix:
            fix = " Fix: " + "; ".join(e.describe() for e in f.fix)
        lines.append(f"::{_COMMAND[f.severity]} {','.join(props)}::{escape_data(f.message + fix)}")
    return "\n".join(lines) + ("\n" if lines else "")
