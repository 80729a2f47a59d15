"""What a check rule reports: a finding with its evidence, numbers and fix.

A ``Finding`` is plain data. Its ``to_dict`` is the JSON contract other tools
read (``oomguard check --format json``): ``rule``, ``severity``, ``title``,
``message``, ``flags``, ``location`` {file, line}, ``fix`` [{flag, value}].

A fix is a list of ``Edit``s. ``Edit.flag`` is a vLLM option as it should be
spelled (``--max-num-batched-tokens``) or, for settings vLLM reads from the
environment, the variable name (``VLLM_ALLOW_LONG_MAX_MODEL_LEN``), or ``SHM_SIZE``
(the container's /dev/shm in GiB, which only a manifest can size).
``value`` None removes the flag; True on a switch means "present".
"""

from __future__ import annotations

import enum

from oomguard.records import NamedTuple, field, record

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any


class Severity(str, enum.Enum):
    """error: will fail to start or will run out of memory; warning: fragile or
    wasteful; info: worth knowing."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


# ``Edit.flag`` of a /dev/shm size (value: GiB): not a vLLM flag but the container's shared memory,
# which check --fix writes in the manifest's own terms (inputs/manifests.py ShmCarrier).
SHM_SIZE = "/dev/shm"


class Edit(NamedTuple):
    """One concrete change to the launch."""

    flag: str  # "--max-num-batched-tokens" or an environment variable name
    value: Any  # None = remove
    dest: str | None = None  # vLLM's dest when the flag is known (used to re-plan)
    # the option exactly as written in the launch, when this edit replaces it
    # (renames: remove "--kv-cache-memory", set "--kv-cache-memory-bytes")
    replaces: str | None = None

    @property
    def is_env(self) -> bool:
        """An environment variable (VLLM_*, CUDA_VISIBLE_DEVICES), not a flag."""
        import re

        return re.fullmatch(r"[A-Z_][A-Z0-9_]*", self.flag) is not None

    @property
    def removes(self) -> bool:
        return self.value is None

    def to_dict(self) -> dict:
        return {"flag": self.flag, "value": self.value}

    def describe(self) -> str:
        """The edit as a person would type it."""
        import json

        if self.flag == SHM_SIZE:
            return f"give /dev/shm {self.value} GiB"
        if self.value is None:
            return f"remove {self.flag}" if not self.is_env else f"unset {self.flag}"
        if self.is_env:
            return f"{self.flag}={self.value}"
        if self.value is True:
            return self.flag
        if isinstance(self.value, (dict, list)):
            return f"{self.flag} '{json.dumps(self.value, separators=(',', ':'))}'"
        return f"{self.flag} {self.value}"


@record
class Finding:
    rule: str
    severity: Severity
    title: str
    message: str
    flags: list[str] = field(default_factory=list)
    file: str | None = None
    line: int | None = None
    fix: list[Edit] = field(default_factory=list)
    numbers: dict[str, Any] = field(default_factory=dict)  # the figures behind the message
    name: str = ""  # the rule's kebab-case name

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "name": self.name,
            "severity": self.severity.value,
            "title": self.title,
            "message": self.message,
            "flags": list(self.flags),
            "location": {"file": self.file, "line": self.line},
            "fix": [e.to_dict() for e in self.fix],
            "numbers": dict(self.numbers),
        }


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Errors first, then warnings, then info; within a severity by rule id (stable)."""
    return sorted(findings, key=lambda f: (f.severity.rank, f.rule))
