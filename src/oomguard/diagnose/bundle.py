"""A compact, size-bounded failure report for a colleague or an issue tracker.

The bundle holds, in this order of priority: oomguard's verdicts and fixes,
the key facts (version, engine, model, non-default arguments, memory lines,
phase, GPU, kernel kills, nvidia-smi peak), and only the log lines around
each piece of evidence. It never exceeds ``max_bytes``: excerpts are dropped
first, then facts are shortened, and a note says what was left out. Every
line is redacted (API keys, tokens, Authorization headers, URL passwords).
"""

from __future__ import annotations

from typing import Any

from oomguard import __version__
from oomguard.diagnose.diagnosis import Diagnosis
from oomguard.diagnose.redact import redact
from oomguard.diagnose.render import fix_text, fmt_value
from oomguard.inputs import logs

DEFAULT_MAX_BYTES = 64 * 1024
CONTEXT_LINES = 3
MAX_EXCERPT_LINE = 400
MIN_MAX_BYTES = 1024


def read_excerpts(path: str, targets: set[int], context: int = CONTEXT_LINES) -> dict[int, str]:
    """The lines around ``targets`` in ``path`` (1-based), read again in one streaming pass."""
    if path == "-" or not targets:
        return {}
    wanted: set[int] = set()
    for t in targets:
        wanted.update(range(max(1, t - context), t + context + 1))
    last = max(wanted)
    out: dict[int, str] = {}
    notes = logs.ReadNotes()
    try:
        stream = logs.open_binary(path)
    except Exception:  # noqa: BLE001 - the file was read once already; if it vanished, skip excerpts
        return {}
    try:
        for block in logs.iter_blocks(stream, notes):
            if block.first_line > last:
                break
            text = block.text
            n_lines = text.count(b"\n") + 1
            block.counted_to, block.counted_lines = block.end, text.count(b"\n")
            if not any(block.first_line <= w < block.first_line + n_lines for w in wanted):
                continue
            line_no = block.first_line
            for raw in text.split(b"\n"):
                if line_no in wanted:
                    out[line_no] = logs.decode_line(raw, line_no, notes, limit=MAX_EXCERPT_LINE * 4)[:MAX_EXCERPT_LINE]
                line_no += 1
                if line_no > last:
                    break
    finally:
        stream.close()
    return out


def _header(data: dict[str, Any]) -> list[str]:
    lines = [f"# vLLM failure report (oomguard {__version__})", ""]
    verdicts = data["verdicts"]
    if not verdicts:
        lines += ["No failure found: the inputs show no error oomguard recognises.", ""]
    for i, v in enumerate(verdicts, 1):
        lines.append(f"## {i}. `{v['class']}` (confidence {v['confidence']:.2f}, phase {v['phase']})")
        lines += ["", v["summary"], ""]
        for n in v.get("numbers", []):
            lines.append(f"- {n}")
        for f in v["fix"]:
            lines.append(f"- fix: `{fix_text(f)}`: {f['why']}")
        lines.append("")
    return lines


def _facts(data: dict[str, Any], *, memory_limit: int) -> list[str]:
    facts = data["facts"]
    lines = ["## Key facts", ""]
    for key in ("version", "engine", "platform", "model", "phase_reached", "exit_code"):
        if facts.get(key) is not None:
            lines.append(f"- {key.replace('_', ' ')}: {facts[key]}")
    gpu = facts.get("gpu")
    if gpu:
        lines.append(f"- GPU: {gpu.get('name') or '?'} ({gpu.get('total_gib') or '?'} GiB) x {gpu.get('count') or '?'}")
    args = facts.get("args") or {}
    if args:
        shown = ", ".join(f"{k}={v!r}" for k, v in list(args.items())[:40])
        lines.append(f"- arguments: {shown}")
    memory = facts.get("memory") or []
    for m in memory[-memory_limit:] if memory_limit else []:
        lines.append(f"- memory {m['name']}: {fmt_value(m['value'])} {m['unit']} ({m['file']}:{m['line']})")
    req = facts.get("requests_in_flight")
    if req:
        lines.append(f"- requests at last report: {req.get('running')} running, {req.get('waiting')} waiting")
    for k in facts.get("kernel_oom_kills", [])[-3:]:
        lines.append(f"- kernel OOM kill: pid {k['pid']} ({k['name']}), anon-rss {k.get('anon_rss_bytes')} B, "
                     f"cgroup {k.get('cgroup')}")
    for smi in facts.get("nvidia_smi", []):
        for g in smi.get("gpus", []):
            lines.append(f"- nvidia-smi {smi['file']} GPU {g['index']}: peak {g.get('peak_used_bytes')} B of "
                         f"{g.get('total_bytes')} B at {g.get('peak_at')}")
    lines.append("")
    lines.append("## Inputs")
    lines.append("")
    for inp in data["inputs"]:
        notes = f" ({'; '.join(inp['notes'])})" if inp["notes"] else ""
        lines.append(f"- `{inp['file']}`: {inp['kind']}, {inp['lines']} lines{notes}")
    lines.append("")
    return lines


def _excerpts(diagnosis: Diagnosis, data: dict[str, Any]) -> list[list[str]]:
    """One block of lines per piece of evidence, most important verdict first."""
    by_file: dict[str, set[int]] = {}
    for v in data["verdicts"]:
        for e in v["evidence"]:
            if e["line"]:
                by_file.setdefault(e["file"], set()).add(e["line"])
    names = {r.name: r.name for r in diagnosis.inputs}
    texts: dict[str, dict[int, str]] = {}
    for name, targets in by_file.items():
        if name in names and name != "<stdin>":
            texts[name] = read_excerpts(name, targets)
    blocks = []
    seen: set[tuple[str, int]] = set()
    for v in data["verdicts"]:
        for e in v["evidence"]:
            key = (e["file"], e["line"])
            if key in seen:
                continue
            seen.add(key)
            around = texts.get(e["file"], {})
            block = [f"`{e['file']}` around line {e['line']} ({v['class']}):", "", "```"]
            if around:
                for n in range(e["line"] - CONTEXT_LINES, e["line"] + CONTEXT_LINES + 1):
                    if n in around:
                        marker = ">" if n == e["line"] else " "
                        block.append(f"{marker}{n:>7} | {redact(around[n])}")
            else:
                block.append(f">{e['line']:>7} | {redact(e['text'][:MAX_EXCERPT_LINE])}")
            block += ["```", ""]
            blocks.append(block)
    return blocks


def build_bundle(diagnosis: Diagnosis, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The report as markdown, at most ``max_bytes`` bytes (UTF-8)."""
    max_bytes = max(MIN_MAX_BYTES, max_bytes)
    data = diagnosis.to_dict()
    header = _header(data)
    excerpts = _excerpts(diagnosis, data)
    for memory_limit in (40, 12, 4, 0):
        facts = _facts(data, memory_limit=memory_limit)
        base = "\n".join(header + facts)
        if _size(base) <= max_bytes - 200 or memory_limit == 0:
            break
    parts = [base, "## Log excerpts", ""]
    used = _size("\n".join(parts))
    omitted = 0
    for block in excerpts:
        text = "\n".join(block)
        if used + _size(text) + 120 > max_bytes:
            omitted += 1
            continue
        parts.append(text)
        used += _size(text) + 1
    if omitted:
        parts.append(f"_{omitted} excerpt(s) left out to stay under {max_bytes} bytes._")
    out = redact("\n".join(parts)) + "\n"
    if _size(out) > max_bytes:
        note = "\n\n_Report truncated to the size limit._\n"
        cut = out.encode("utf-8")[: max_bytes - len(note.encode())].decode("utf-8", errors="ignore")
        out = cut + note
    return out


def _size(text: str) -> int:
    return len(text.encode("utf-8"))
