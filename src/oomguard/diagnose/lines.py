"""Strip what wraps a log message: colours, container and journald prefixes, vLLM's own prefix.

Handles, in any combination:
- ANSI colour codes;
- Docker ``json-file`` lines (``{"log": "...", "stream": ...}``), ``docker compose logs``
  (``vllm-1  | ``), Kubernetes CRI files (``2024-05-01T12:00:00.1Z stderr F ``),
  ``kubectl logs --timestamps`` / ``docker logs -t`` (ISO timestamp);
- journald / syslog (``May 01 12:00:00 host kernel: ``) and ``dmesg`` (``[ 123.456]``,
  ``dmesg -T``, ``dmesg -x``);
- vLLM's process prefix (``(EngineCore_DP0 pid=12)``, ``(VllmWorkerProcess pid=5)``, Ray's
  ``(RayWorkerWrapper pid=7, ip=10.0.0.1)``), possibly nested;
- vLLM's level/time/source prefix in V0 (``INFO 04-08 19:52:46 llm_engine.py:74] ``) and V1
  (``INFO 06-23 14:21:48 [gpu_worker.py:232] ``) spellings, with or without date or time, and
  uvicorn's ``INFO:     ``.
"""

from __future__ import annotations

import json
import re

from oomguard.diagnose.events import LogLine
import oomguard.lazy_re as lazy_re

_ANSI = lazy_re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07]*\x07")
_CRI = lazy_re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)\s+(?:stdout|stderr)\s+[FP]\s")
_ISO = lazy_re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d)(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+")
_COMPOSE = lazy_re.compile(r"^[A-Za-z0-9][\w.-]*\s*\|\s")
_RECORD_LEVELS = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ", "(")
# `kubectl logs --prefix`: "[pod/vllm-7d9f/vllm] " before every line.
_KUBECTL_PREFIX = lazy_re.compile(r"^\[pod/[\w.-]{1,253}/[\w.-]{1,63}\]\s")
# Ray Serve's own records: "INFO 2024-11-07 02:21:29,123 default_VLLMDeployment kfcx7f0b -- message" (the
# deployment or controller, a replica id, then "--").
_RAY_SERVE = lazy_re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? "
                             r"(?:[\w.:-]{1,120} ){1,3}-- ")
# Python's logging after a timestamp, as wrappers print it: "%(name)s %(process)d %(levelname)s" (Xinference:
# "xinference.core.model 822191 ERROR    msg") and "- %(name)s - %(levelname)s -" (GPUStack, vllm-ascend:
# "- gpustack.worker.backends.vllm - INFO - msg"). Only after a timestamp: a sentence may start "numpy 2 ERROR".
_PYLOG = lazy_re.compile(r"^(?:-\s+)?([A-Za-z_][\w.]{0,80})(?:\s+\d{1,10})?\s+(?:-\s+)?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
                         r"(?:\s+-\s+|:?\s+)")
_JOURNAL = lazy_re.compile(
    r"^([A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d)\s+\S+\s+([\w.@/:-]+?)(?:\[(\d+)\])?:\s"
)
_HOST_IDENT = lazy_re.compile(r"^\S+\s+(kernel):\s")  # rsyslog after an ISO timestamp
_DMESG = lazy_re.compile(
    r"^(?:<\d>)?(?:(?:kern|user|daemon|syslog)\s*:\s*\w+\s*:\s*)?"
    r"\[\s*(\d+\.\d+|[A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d+\s+\d\d:\d\d:\d\d\s+\d{4})\]\s?"
)
# Lines the prefixes above mark as kernel messages, for diagnose's byte scan (parsers/scanset.py): every kernel
# line is a cue (comp:kernel). The journald / rsyslog identifier "kernel" in front of a message, or dmesg's stamp.
_KERNEL_IDENT = lazy_re.compile(r"\skernel(?:\[\d+\])?:\s")
KERNEL_SCAN = (_DMESG, _KERNEL_IDENT)
# vLLM <= 0.7's record prefix ("INFO 10-14 12:32:48 worker.py:124] ", no bracket before the file): one such line says
# the engine is V0. On every line of such a log, so the scan takes one per block (ONCE_SCAN), not each of them.
# Written for the scan: the file name after whitespace (_LEVEL's group 4 always follows some) and the "]".
_OLD_PREFIX_SCAN = lazy_re.compile(r"\s[\w./-]+\.py(?::\d+)?\]")
ONCE_SCAN = (_OLD_PREFIX_SCAN,)
# "(EngineCore_DP0 pid=12)", "(VllmWorker TP0 pid=7)", "(VllmWorker rank=0 pid=7)", "(RayWorkerWrapper pid=7, ip=..)"
_RANK = lazy_re.compile(r"^\[rank(\d+)\]:\s?")
_PROC = lazy_re.compile(r"^\(([A-Za-z_][\w.:/=-]*(?:\s[\w.:/=-]+)*?)(?:\s+pid=(\d+))?(?:,\s*ip=[\w.:]+)?\)\s+")
_LEVEL = lazy_re.compile(
    r"^(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?::\s+|\s+)"
    r"(?:(\d\d-\d\d)\s+)?(?:(\d\d:\d\d:\d\d)(?:[.,]\d+)?\s+)?"
    r"(?:\.\.\.\s+)?(?:\[?([\w./-]+\.py)(?::(\d+))?\]\s*)?"
)
_TIME_FIRST = lazy_re.compile(
    r"^(\d\d:\d\d:\d\d)(?:\.\d+)?Z?\s+(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|\[\w+\s*\])\s+(?:\[([\w./-]+\.py):(\d+)\]\s*)?"
)
# Shapes that say "this is a log record or program output", as opposed to prose someone wrote.
_RECORD_LIKE = lazy_re.compile(
    r"^(?:Traceback|\s+File \"|\s|[\w.]+(?:Error|Exception|Warning|Interrupt)\b|usage:|[\w.-]+: error:|"
    r"raise |torch\.|RuntimeError|ValueError|\[rank\d+\]|#|[\w.]+\.py|\S+=|Killed|Out of memory|oom|"
    r"Memory cgroup|Loading|Model loading|Available KV|GPU KV|Maximum concurrency|Graph capturing|"
    r"the current vLLM|model weights take|non_torch|PyTorch activation|\w+ KV cache size|"
    r"NVML_SUCCESS|CUDA error|`)"
)


# Shapes _RECORD_LIKE takes for records that are often people's sentences (issue 16): a line led by an inline code
# span ("`vllm serve` fails with ...", "`nvidia-smi` shows 4 MiB used"), an indented list item ("   • Model output
# is degenerate", "  1. The coordinator path can initialize ..."). They are prose when what follows the span or the
# list marker reads as a sentence: enough plain words, few code tokens.
_CODE_SPAN_LED = lazy_re.compile(r"^`[^`\n]{1,120}`(?=[\s,.:;)!?])")
_LIST_MARK = lazy_re.compile(r"^\s*(?:[-*\u2022>]+|\d{1,2}[.)])\s+")
_PLAIN_WORD = lazy_re.compile(r"^[(\"'\u201c]?[A-Za-z][A-Za-z]*(?:['\u2019-][A-Za-z]+)*[)\"'\u201d]?[,.;:!?]?$")
_CODE_TOKEN = lazy_re.compile(r"[={}\[\]<>|\\]|\w\(|::|\.py\b|\w\.\w+\.|^[\w.]+:\d+\b|^0x")
PROSE_MIN_WORDS = 4
PROSE_WORD_SHARE = 0.6


def reads_as_sentence(text: str) -> bool:
    """True when ``text`` reads as something a person wrote: at least PROSE_MIN_WORDS plain words, making up at least
    PROSE_WORD_SHARE of its tokens, and at most one token shaped like code (a call, an assignment, a path:line)."""
    tokens = text.split()
    if len(tokens) < PROSE_MIN_WORDS:
        return False
    words = sum(1 for t in tokens if _PLAIN_WORD.match(t))
    code = sum(1 for t in tokens if _CODE_TOKEN.search(t))
    return words >= PROSE_MIN_WORDS and words >= PROSE_WORD_SHARE * len(tokens) and code <= 1


def _prose_despite_shape(msg: str) -> bool:
    """A line _RECORD_LIKE takes for a record that is a sentence: led by an inline code span, or indented (a list
    item, a quoted paragraph), with a sentence after the span or the indent."""
    if msg.startswith("`"):
        m = _CODE_SPAN_LED.match(msg)
        return m is not None and reads_as_sentence(msg[m.end():])
    if msg[:1].isspace():
        # only a list item: an indented line without a marker is a code block, or a log record cut at its prefix
        # (" Sequence group 221 is preempted ..." reads as a sentence, and is vLLM's)
        m = _LIST_MARK.match(msg)
        body = msg[m.end():].strip() if m else ""
        return bool(body) and not _RECORD_LIKE.match(body) and reads_as_sentence(body)
    return False


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def parse_line(file: str, line_no: int, text: str, following: str = "", truncated: bool = False) -> LogLine:
    """Split ``text`` into the wrapped message and what we learned from its prefixes."""
    raw = strip_ansi(text).rstrip("\r\n")
    msg = raw
    if msg.startswith('{"log":') or msg.startswith('{"log" :'):
        try:
            msg = str(json.loads(msg).get("log", "")).rstrip("\n")
        except (ValueError, AttributeError):
            pass
    time = None
    kernel = False
    had_prefix = False
    if msg.startswith(("│", "┃")) and msg[1:].lstrip().startswith(_RECORD_LEVELS):
        # a terminal UI's log pane (k9s, Lens): "│ INFO 03-21 20:19:24 [launcher.py:34] Route: ... │" (only a
        # record: rich's traceback boxes are read by parsers/frames.py as they are)
        msg = msg[1:].rstrip().rstrip("│┃").strip()
    m = _KUBECTL_PREFIX.match(msg) if msg.startswith("[pod/") else None
    if m:
        msg = msg[m.end():]
        had_prefix = True
    m = _CRI.match(msg)
    if m:
        msg = msg[m.end():]
        had_prefix = True
    m = _ISO.match(msg)
    if m:
        time = m.group(1)
        msg = msg[m.end():]
        had_prefix = True
        h = _HOST_IDENT.match(msg)
        if h:
            kernel = True
            msg = msg[h.end():]
    m = _COMPOSE.match(msg)
    if m and not msg.startswith(("INFO", "WARN", "ERROR", "DEBUG")):
        msg = msg[m.end():]
        had_prefix = True
        m = _ISO.match(msg)
        if m:
            time = m.group(1)
            msg = msg[m.end():]
    m = _JOURNAL.match(msg)
    if m:
        time = m.group(1)
        kernel = m.group(2) == "kernel"
        msg = msg[m.end():]
        had_prefix = True
    m = _DMESG.match(msg)
    if m:
        time = time or m.group(1)
        kernel = True
        msg = msg[m.end():]
        had_prefix = True
    proc = ""
    m = _RANK.match(msg)
    if m:
        proc = f"rank{m.group(1)}"
        msg = msg[m.end():]
        had_prefix = True
    for _ in range(2):
        m = _PROC.match(msg)
        if not m:
            break
        proc = f"{m.group(1)} pid={m.group(2)}" if m.group(2) else m.group(1)
        msg = msg[m.end():]
        had_prefix = True
    level = src = None
    old_prefix = False
    if time is not None and not proc:
        m = _PYLOG.match(msg)
        if m:
            level = "WARNING" if m.group(2) == "WARN" else m.group(2)
            msg = msg[m.end():]
    if level is None and " -- " in msg:
        m = _RAY_SERVE.match(msg)
        if m:
            level, time = m.group(1), time or m.group(2)
            msg = msg[m.end():]
            had_prefix = True
    m = _LEVEL.match(msg) if level is None else None
    if m and (m.group(2) or m.group(3) or m.group(4) or msg[m.end(1):m.end(1) + 1] == ":"):
        level = "WARNING" if m.group(1) == "WARN" else m.group(1)
        time = time or " ".join(x for x in (m.group(2), m.group(3)) if x) or None
        if m.group(4):
            src = f"{m.group(4)}:{m.group(5)}" if m.group(5) else m.group(4)
            old_prefix = msg[m.start(4) - 1:m.start(4)] != "[" and msg[m.end(4):m.end()].rstrip().endswith("]")
        msg = msg[m.end():]
        had_prefix = True
    elif level is None:
        m = _TIME_FIRST.match(msg)
        if m:
            time = m.group(1)
            level = m.group(2).strip("[] ").upper()
            if m.group(3):
                src = f"{m.group(3)}:{m.group(4)}"
            msg = msg[m.end():]
            had_prefix = True
    stripped = msg.strip()
    prose = not had_prefix and not kernel and bool(stripped) and (not _RECORD_LIKE.match(msg)
                                                                  or _prose_despite_shape(msg))
    return LogLine(
        file=file,
        line=line_no,
        raw=raw,
        message=stripped if not msg.startswith(("  File", "    ")) else msg.rstrip(),
        proc=proc,
        level=level,
        src=src,
        time=time,
        kernel=kernel,
        prose=prose,
        following=following,
        truncated=truncated,
        old_prefix=old_prefix,
    )
