"""What ``calibrate`` reads: files, directories, globs and stdin, as text logs or log-store exports.

Every input is streamed (``oomguard.inputs.logs``: gzip decoded, bounded memory). Two
shapes are recognised from content, never from the name:

- **a text log**: vLLM's own output, ``kubectl logs`` (``--prefix`` names the pod),
  ``docker logs`` / ``docker compose logs`` (``svc-1  | `` names the service), journald;
  diagnose's line reader (``diagnose.lines.parse_line``) strips what wraps a message;
- **JSON lines** from a log store: one object a line with the message in a field that
  ``--message-field`` names (a dotted path, ``_source.message``) or that is found among
  the usual ones (``MESSAGE_FIELDS``: Loki's ``line``, Elasticsearch/OpenSearch's
  ``_source.message``, CloudWatch's ``message``, Docker's ``log``, journald's ``MESSAGE``);
  Loki's ``{"stream": {...}, "values": [[ts, line], ...]}`` objects are unrolled. Labels
  that name a replica (pod, container, host, log stream) keep replicas apart, and lines
  with timestamps are put back in time order (Loki exports newest first).

Only the lines diagnose's prefilter keeps (``diagnose.prefilter``: the parsers' patterns) are decoded:
those are every line its parsers understand, and a start-up's ledger is among them.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from oomguard.errors import InputError
from oomguard.inputs import files, logs

# Where log stores put the message, in the order they are tried.
MESSAGE_FIELDS = ("log", "line", "message", "msg", "MESSAGE", "_source.message", "_source.log", "@message",
                  "textPayload", "_raw", "event.original", "fields.message")
# Labels that tell replicas (or restarts of one pod) apart, most specific first.
STREAM_FIELDS = ("kubernetes.pod_name", "kubernetes.pod.name", "_source.kubernetes.pod.name", "_source.kubernetes.pod_name",
                 "pod", "pod_name", "k8s.pod.name", "container_name", "container", "logStreamName", "log_stream",
                 "host.name", "_source.host.name", "hostname", "host", "_HOSTNAME", "instance", "_SYSTEMD_UNIT")
LABEL_FIELDS = ("stream", "labels", "_source.kubernetes.labels")
TIME_FIELDS = ("timestamp", "@timestamp", "_source.@timestamp", "time", "ts", "__REALTIME_TIMESTAMP", "ingestionTime")

_GLOB = re.compile(r"[*?\[]")
_KUBECTL_PREFIX = re.compile(r"^\[(pod/[^\]\s]{1,253})\]\s")
_COMPOSE_PREFIX = re.compile(r"^([A-Za-z0-9][\w.-]{0,120}?)\s*\|\s")
# GPU names printed in lines the prefilter does not keep (MoE / FP8 kernel config file names, nvidia-smi tables).
_GPU_HINT = re.compile(rb"device_name=|NVIDIA |GeForce|Tesla |Instinct|Radeon|\| +\d+ +NVIDIA")
MAX_INPUTS = 10_000
MAX_SORTED_LINES = 2_000_000  # lines kept per export to restore time order (only prefiltered lines are kept)


@dataclass
class SourceLine:
    file: str
    line: int
    text: str
    stream: str = ""  # the replica / service / pod the line came from ("" when unnamed)


@dataclass
class ReadReport:
    """What was read from one input (for the output's ``inputs`` list)."""

    file: str
    form: str  # "text" | "json-lines" | "empty" | "binary"
    lines: int = 0
    kept: int = 0
    notes: list[str] = field(default_factory=list)
    message_field: str | None = None

    def to_dict(self) -> dict:
        d = {"file": self.file, "form": self.form, "lines": self.lines, "kept_lines": self.kept, "notes": list(self.notes)}
        if self.message_field:
            d["message_field"] = self.message_field
        return d


def expand(inputs: list[str]) -> list[str]:
    """Files of the inputs: ``-``, files, directories (recursively, sorted) and globs; InputError for none."""
    out: list[str] = []
    for item in inputs:
        if item == "-" or files.is_named_stream(item):
            out.append(item)
        elif files.is_dir(item):
            found = sorted(str(p) for p in _walk(item))
            if not found:
                raise InputError("directory holds no files", file=item)
            out += found
        elif _GLOB.search(item) and not files.exists(item):
            found = sorted(p for p in glob.glob(item, recursive=True) if files.is_file(p))
            if not found:
                raise InputError("no file matches this pattern", file=item)
            out += found
        else:
            files.stat_path(item, "log")  # "no such file" / "a directory" as one line
            out.append(item)
        if len(out) > MAX_INPUTS:
            raise InputError(f"more than {MAX_INPUTS:,} input files: pass fewer (or one directory per run)")
    if out.count("-") > 1:
        raise InputError("stdin (-) given more than once")
    return out


def _walk(directory: str) -> Iterator[str]:
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in sorted(names):
            if not n.startswith("."):
                yield os.path.join(root, n)


def read(path: str, *, message_field: str | None = None) -> tuple[ReadReport, Iterator[SourceLine]]:
    """Open one input and return its report (filled as the iterator runs) and its kept lines."""
    name = logs.display_name(path)
    stream = logs.open_binary(path)
    try:
        sample = logs.sniff(stream)
    except InputError:
        stream.close()
        raise
    if not sample:
        if path != "-":
            stream.close()
        return ReadReport(name, "empty", notes=["file is empty"]), iter(())
    if logs.looks_binary(sample):
        if path != "-":
            stream.close()
        return ReadReport(name, "binary", notes=["binary content; not read"]), iter(())
    if _is_json_lines(sample):
        report = ReadReport(name, "json-lines", message_field=message_field)
        return report, _closing(path, stream, _json_lines(stream, name, report, message_field))
    if message_field:
        if path != "-":
            stream.close()
        raise InputError(f"--message-field {message_field}: this input is not JSON lines (one JSON object a line)", file=name)
    report = ReadReport(name, "text")
    return report, _closing(path, stream, _text_lines(stream, name, report))


def _closing(path: str, stream, it: Iterator[SourceLine]) -> Iterator[SourceLine]:
    try:
        yield from it
    finally:
        if path != "-":
            stream.close()


def _is_json_lines(sample: bytes) -> bool:
    first = next((ln for ln in sample.split(b"\n") if ln.strip()), b"").strip()
    if not first.startswith(b"{"):
        return False
    if first.startswith((b'{"log":', b'{"log" :')):
        return True  # Docker's json-file lines: the message is "log"
    try:
        return isinstance(json.loads(first), dict)
    except ValueError:
        return False


# ---------------------------------------------------------------- text logs


def _keyword_starts(data: bytes, start: int, end: int) -> list[int]:
    """Starts of the lines diagnose's prefilter keeps (its engine: hyperscan, RE2 or re), plus GPU-name lines."""
    from oomguard.diagnose.prefilter import engine

    starts = {ls for ls, _le, _hit, _ids in engine().lines(data, start, end)}
    for m in _GPU_HINT.finditer(data, start, end):
        starts.add(max(start, data.rfind(b"\n", start, m.start()) + 1))
    return sorted(starts)


def _has_keyword(raw: bytes) -> bool:
    from oomguard.diagnose.prefilter import engine

    return bool(engine().lines(raw, 0, len(raw))) or bool(_GPU_HINT.search(raw))


def _text_lines(stream, name: str, report: ReadReport) -> Iterator[SourceLine]:
    """The lines of a text log that the prefilter keeps, found block by block (no per-line Python loop)."""
    notes = logs.ReadNotes()
    for block in logs.iter_blocks(stream, notes):
        data = block.data
        size = block.end if not block.long_line_piece else len(data)
        line_no, counted = block.first_line, 0
        for start in _keyword_starts(data, 0, size):
            end = data.find(b"\n", start, size)
            if end < 0:
                end = size
            line_no += data.count(b"\n", counted, start)
            counted = start
            text = logs.decode_line(data[start:end], line_no, notes)
            report.kept += 1
            stream_key, text = _prefix_stream(text)
            yield SourceLine(name, line_no, text, stream_key)
        block.counted_to, block.counted_lines = counted, line_no - block.first_line
    report.lines = notes.lines
    report.notes += notes.summary()


def _prefix_stream(text: str) -> tuple[str, str]:
    """(replica, text without the replica's prefix): kubectl ``--prefix`` and compose ``svc-1  | ``."""
    m = _KUBECTL_PREFIX.match(text)
    if m:
        return m.group(1), text[m.end():]
    if "|" in text[:130]:
        m = _COMPOSE_PREFIX.match(text)
        if m and not text.startswith(("INFO", "WARN", "ERROR", "DEBUG", "(")):
            return m.group(1), text[m.end():]
    return "", text


# ---------------------------------------------------------------- JSON lines


def dotted(obj: Any, path: str) -> Any:
    """``obj["a"]["b"]`` for ``a.b`` (a key that itself holds dots is tried whole first)."""
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _json_lines(stream, name: str, report: ReadReport, message_field: str | None) -> Iterator[SourceLine]:
    notes = logs.ReadNotes()
    kept: list[tuple[Any, int, SourceLine]] = []
    timed = True
    seq = 0
    chosen = message_field
    for line_no, text in logs.iter_text_lines(stream, notes):
        raw = text.strip()
        if not raw:
            continue
        if not raw.startswith("{"):
            raise InputError("not a JSON object (a JSON-lines export has one object a line)", file=name, line=line_no)
        if not _has_keyword(raw.encode("utf-8", "replace")):
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise InputError(f"invalid JSON ({exc.msg} at column {exc.colno})", file=name, line=line_no) from None
        except RecursionError:
            raise InputError("JSON nested too deeply", file=name, line=line_no) from None
        if not isinstance(obj, dict):
            raise InputError("not a JSON object (a JSON-lines export has one object a line)", file=name, line=line_no)
        for ts, msg, labels in _messages(obj, chosen):
            if msg is None:
                if message_field:
                    raise InputError(f"--message-field {message_field}: no such field (keys: {', '.join(list(obj)[:8])})",
                                     file=name, line=line_no)
                raise InputError("no message field found (tried " + ", ".join(MESSAGE_FIELDS) + "): name it with --message-field",
                                 file=name, line=line_no)
            if chosen is None:
                chosen = msg[0]
                report.message_field = chosen
            for piece in str(msg[1]).splitlines() or [""]:
                if not _has_keyword(piece.encode("utf-8", "replace")):
                    continue
                seq += 1
                key = _time_key(ts)
                timed = timed and key is not None
                kept.append((key, seq, SourceLine(name, line_no, piece, _stream_of(obj, labels))))
                if len(kept) > MAX_SORTED_LINES:
                    raise InputError(f"more than {MAX_SORTED_LINES:,} vLLM lines in one export: split it", file=name)
    report.lines = notes.lines
    report.notes += notes.summary()
    report.kept = len(kept)
    if timed and kept:
        kinds = {type(k[0]) for k in kept}
        if len(kinds) == 1:
            kept.sort(key=lambda k: (k[0], k[1]))
            if any(a[1] > b[1] for a, b in zip(kept, kept[1:])):
                report.notes.append("lines put back in time order (the export was not)")
    for _k, _s, line in kept:
        yield line


def _messages(obj: dict, field_name: str | None) -> Iterator[tuple[Any, tuple[str, Any] | None, dict]]:
    """(timestamp, (field, message) or None, labels) of every message in one object."""
    values = obj.get("values")
    if isinstance(values, list) and isinstance(obj.get("stream"), dict):
        # Loki's query API: one stream, many [ts, line] pairs
        for pair in values:
            if isinstance(pair, list) and len(pair) >= 2:
                yield pair[0], ("values", pair[1]), obj["stream"]
        return
    labels = {}
    for lf in LABEL_FIELDS:
        v = dotted(obj, lf)
        if isinstance(v, dict):
            labels = v
            break
    names = (field_name,) if field_name else MESSAGE_FIELDS
    for f in names:
        v = dotted(obj, f)
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            yield _first(obj, TIME_FIELDS), (f, v), labels
            return
    yield None, None, labels


def _first(obj: dict, names: tuple[str, ...]) -> Any:
    for n in names:
        v = dotted(obj, n)
        if v is not None:
            return v
    return None


def _time_key(ts: Any) -> Any:
    """A sortable key: a number (epoch in any unit, one unit per export) or an ISO-8601 string."""
    if isinstance(ts, bool) or ts is None:
        return None
    if isinstance(ts, (int, float)):
        return float(ts)
    text = str(ts).strip()
    if re.fullmatch(r"\d{9,20}(?:\.\d+)?", text):
        return float(text)
    if re.match(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d", text):
        return text.replace(" ", "T")
    return None


def _stream_of(obj: dict, labels: dict) -> str:
    for key in ("pod", "pod_name", "container", "instance", "host", "job", "filename"):
        if isinstance(labels.get(key), str):
            return f"{key}={labels[key]}"
    for f in STREAM_FIELDS:
        v = dotted(obj, f)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return f"{f}={v}"
    return ""
