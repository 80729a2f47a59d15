"""Read each input: detect its kind from content, then stream it through the parsers.

Kinds are decided from the first 64 KiB (never from the file name): a vLLM
log, kernel messages (dmesg / journalctl -k), nvidia-smi's table or CSV
series, ``nvidia-smi topo -m``, a launch script, plain text, or something
unreadable (empty, binary). Log-like kinds all go through the same scanner,
because real files mix them (journalctl with both vLLM and kernel lines,
a pasted issue with a log inside).

Log-like kinds go through ``scanner.scan``: one multi-keyword pass over the
bytes, only matching lines decoded and parsed, stretches that only repeat what
was parsed counted instead.
"""

from __future__ import annotations

import io
import re
from typing import Any, BinaryIO

from oomguard.diagnose.classes import InputKind, Phase
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.scanner import every_line, scan
from oomguard.inputs import logs
from oomguard.inputs.nvidia_smi import NvidiaSmiParser, looks_like_csv, looks_like_table
import oomguard.lazy_re as lazy_re
from oomguard.records import field, record

__all__ = ["InputReport", "detect_kind", "every_line", "read_input", "scan"]

_TOPO_RAW_BYTES = 8192


@record
class InputReport:
    """What we did with one input, for the ``inputs`` section of the output."""

    name: str
    kind: InputKind
    bytes_read: int = 0
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    matched_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.name, "kind": self.kind.value, "bytes": self.bytes_read, "lines": self.lines,
                "matched_lines": self.matched_lines, "notes": self.notes}


_VLLM_SIGNS = lazy_re.compile(
    r"vllm|vLLM|EngineCore|\[gpu_model_runner\.py|\[gpu_worker\.py|llm_engine\.py|model_runner\.py|"
    r"\(APIServer pid=|Avg prompt throughput|KV cache|CUDA out of memory|OutOfMemoryError|Traceback"
)
_KERNEL_SIGNS = lazy_re.compile(
    r"^\[\s*\d+\.\d+\]|^\[[A-Z][a-z]{2} [A-Z][a-z]{2} |kernel: |oom-kill|invoked oom-killer|Killed process|"
    r"Memory cgroup out of memory|^(?:kern|user|daemon)\s*:", re.MULTILINE
)
# What only a log (not a launch script) contains.
_LOG_SIGNS = lazy_re.compile(r"\b(?:INFO|WARNING|ERROR|DEBUG)\b|EngineCore|Traceback|\bpid=\d+|\berror:|^usage:", re.MULTILINE)
_TOPO_SIGNS = lazy_re.compile(r"^\s*GPU0(?:\s+GPU\d+)*\s+(?:NIC\d+\s+)*(?:CPU Affinity|mlx)|Legend:\s*\n\s*X\s+= Self", re.MULTILINE)
_LAUNCH_SIGNS = lazy_re.compile(r"^(?:#!.*\n)?(?:.*\n){0,40}?.*(?:\bvllm\s+serve\b|-m\s+vllm\.entrypoints|vllm/vllm-openai)", re.MULTILINE)


def detect_kind(sample: bytes) -> InputKind:
    if not sample:
        return InputKind.EMPTY
    if logs.looks_binary(sample):
        return InputKind.BINARY
    text = sample.decode("utf-8", errors="replace")
    if _TOPO_SIGNS.search(text):
        return InputKind.NVIDIA_SMI_TOPO
    if looks_like_table(text):
        return InputKind.NVIDIA_SMI
    if looks_like_csv(text):
        return InputKind.NVIDIA_SMI_CSV
    vllm_hits = len(_VLLM_SIGNS.findall(text))
    kernel_hits = len(_KERNEL_SIGNS.findall(text))
    if kernel_hits > vllm_hits:
        return InputKind.KERNEL_LOG
    log_hits = len(_LOG_SIGNS.findall(text))
    if not log_hits and len(text) < 20000 and text.count("\n") < 200 and _LAUNCH_SIGNS.search(text):
        return InputKind.LAUNCH
    if vllm_hits:
        return InputKind.VLLM_LOG
    return InputKind.TEXT


def read_input(path: str, col: Collector) -> tuple[InputReport, str | None]:
    """Read one input into ``col``. Returns its report and, for a launch script, its text."""
    name = logs.display_name(path)
    notes = logs.ReadNotes()
    # Every failure to read (a device, a FIFO, damaged gzip, over the byte cap) is an InputError: an input
    # we could not read must never be reported as one that shows a clean start.
    stream = logs.open_binary(path)
    try:
        notes.gzip = logs.is_gzip(stream)
        sample = logs.sniff(stream)
        kind = detect_kind(sample)
        report = InputReport(name, kind)
        col.start_file(name)
        launch_text = None
        if kind == InputKind.EMPTY:
            notes.empty = True
        elif kind == InputKind.BINARY:
            notes.binary = True
        elif kind in (InputKind.NVIDIA_SMI, InputKind.NVIDIA_SMI_CSV):
            _read_nvidia_smi(stream, kind, name, col, notes)
        elif kind == InputKind.NVIDIA_SMI_TOPO:
            _read_topology(stream, name, col, notes)
        elif kind == InputKind.LAUNCH:
            raw = stream.read(1 << 20)
            launch_text = raw.decode("utf-8", errors="replace")
            # Scanned as well: a wrongly detected log must not lose its errors.
            report.matched_lines = scan(io.BufferedReader(io.BytesIO(raw)), name, col, notes)
        else:
            report.matched_lines = scan(stream, name, col, notes, direct=path != "-")
        report.bytes_read = notes.bytes_read
        report.lines = notes.lines
        if notes.gzip:
            report.notes.append("gzip-compressed; decompressed while reading")
        report.notes.extend(notes.summary())
        # Said only when nothing was read from it: an access log or a metrics line that shows the server
        # answering is recognised (the verdict says "running") even though no parser line matched.
        if kind in (InputKind.TEXT,) and report.matched_lines == 0 and notes.bytes_read \
                and col.phase_reached == Phase.UNKNOWN and not (col.errors or col.signals or col.cues):
            report.notes.append("no vLLM, kernel or nvidia-smi content recognised")
        return report, launch_text
    finally:
        if path != "-":
            stream.close()


def _read_nvidia_smi(stream: BinaryIO, kind: InputKind, name: str, col: Collector, notes: logs.ReadNotes) -> None:
    parser = NvidiaSmiParser("csv" if kind == InputKind.NVIDIA_SMI_CSV else "table")
    for line_no, text in logs.iter_text_lines(stream, notes):
        parser.feed(line_no, text)
    report = parser.report()
    gpus = []
    for series in report.gpus.values():
        peak = series.peak
        entry: dict[str, Any] = {
            "index": series.index, "name": series.name, "total_bytes": series.memory_total_bytes,
            "samples": series.num_samples,
            "peak_used_bytes": peak.memory_used_bytes if peak else None,
            "peak_at": (peak.timestamp or f"line {peak.source_line}") if peak else None,
            "peak_line": peak.source_line if peak else None,
            "first_used_bytes": series.first.memory_used_bytes if series.first else None,
            "last_used_bytes": series.last.memory_used_bytes if series.last else None,
            "steps": [{"from_bytes": s.from_bytes, "to_bytes": s.to_bytes, "at": s.timestamp, "line": s.source_line}
                      for s in series.steps],
        }
        gpus.append(entry)
        if series.index is not None:
            col.add_gpu(series.index, name=series.name, total_bytes=series.memory_total_bytes)
    col.nvidia_smi.append({
        "file": name, "form": report.form, "snapshots": report.num_snapshots, "driver": report.driver_version,
        "cuda": report.cuda_version, "gpus": gpus,
        "processes": [{"gpu": p.gpu_index, "pid": p.pid, "name": p.name, "used_bytes": p.used_memory_bytes}
                      for p in report.processes[:50]],
    })


def _read_topology(stream: BinaryIO, name: str, col: Collector, notes: logs.ReadNotes) -> None:
    raw = stream.read(_TOPO_RAW_BYTES)
    notes.bytes_read = len(raw)
    text = raw.decode("utf-8", errors="replace")
    entry: dict[str, Any] = {"file": name}
    try:
        from oomguard.inputs.topology import parse_topology  # type: ignore[import-not-found]

        topo = parse_topology(text)
        entry["parsed"] = topo.to_dict() if hasattr(topo, "to_dict") else repr(topo)
    except ImportError:
        entry["raw"] = text
    except Exception as exc:  # noqa: BLE001 - a topology we cannot parse is a note, not a failure
        entry["raw"] = text
        entry["note"] = f"could not parse: {exc}"
    col.topology.append(entry)
