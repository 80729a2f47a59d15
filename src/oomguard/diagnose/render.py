"""Show a ``Diagnosis`` to people (text via rich, markdown) or programs (JSON).

Every renderer works from ``Diagnosis.to_dict()``, which is already redacted,
so no secret can reach the output whatever the format. ``rich`` is imported
only when text output is produced.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from oomguard.diagnose.diagnosis import Diagnosis

GiB = 1 << 30


def shared_not_checked(fixes: list[dict]) -> str | None:
    """The one reason every checkable fix of a failure went unchecked ("not checked: no GPU known ..."),
    said once under the fixes instead of on each; None when the fixes have their own verdicts."""
    reasons = {f.get("checked") for f in fixes if f.get("checked")}
    if len(reasons) == 1 and not any(f.get("effect") for f in fixes):
        reason = next(iter(reasons))
        if reason.startswith("not checked: "):
            return reason
    return None


def fmt_value(value: Any) -> str:
    """1032448.0 -> '1,032,448'; 14.2474 -> '14.2474'."""
    if isinstance(value, (int, float)) and float(value).is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _where(item: dict[str, Any]) -> str:
    """file:line; a cue about a whole paste (the functions of its tracebacks) has no one line (line 0)."""
    return f"{item['file']}:{item['line']}" if item.get("line") else f"{item['file']} (the whole paste)"


def fix_text(fix: dict[str, Any]) -> str:
    """A fix as the user would type it: '--max-model-len 34736', 'remove --swap-space', 'VAR=1'."""
    flag, value = fix["flag"], fix["value"]
    if value is None:
        return f"remove {flag}"
    if flag.islower() and not flag.startswith("-"):
        return f"{flag}: {value}"  # an action outside vLLM's flags (pip, docker, ray, a request)
    if not flag.startswith("-"):
        return f"{flag}={value}"
    if value is True:
        return flag
    if fix.get("choose"):  # FixValue.CHOOSE: the message names the setting, not its value
        return f"change {flag} (to a value the message allows)"
    if isinstance(value, str) and (" " in value or "{" in value):
        return f"{flag} '{value}'"
    return f"{flag} {value}"


def _incomplete_lines(inc: dict[str, Any], lead: str) -> list[str]:
    out = [lead + inc["summary"] + "."]
    if inc.get("likely"):
        out.append(f"- likely (lower confidence {inc['likely_confidence']:.2f}): {inc['likely']}")
    out.append("- collect next: " + "; ".join(inc["collect"]))
    return out


def _fact_line(data: dict[str, Any]) -> list[str]:
    facts = data["facts"]
    out = []
    ident = []
    if facts.get("version"):
        ident.append(f"vLLM {facts['version']}")
    if facts.get("engine"):
        ident.append(facts["engine"])
    if facts.get("platform"):
        ident.append(f"platform {facts['platform']}")
    if facts.get("model"):
        ident.append(f"model {facts['model']}")
    gpu = facts.get("gpu")
    if gpu and (gpu.get("name") or gpu.get("total_gib")):
        ident.append(f"GPU {gpu.get('name') or ''} {str(gpu['total_gib']) + ' GiB' if gpu.get('total_gib') else ''}".strip())
    if ident:
        out.append(" | ".join(ident))
    out.append(f"phase reached: {facts.get('phase_reached', 'unknown')}")
    planner = facts.get("planner")
    if planner and planner.get("checked"):
        out.append(f"fixes checked by the planner on {planner['model']} (from {planner['model_from']}) and "
                   f"{planner['gpu']} {planner['gpu_total_gib']} GiB (from {planner['gpu_from']})"
                   + "".join(f"; {n}" for n in planner.get("notes", [])))
    for check in facts.get("agreement", []):
        out.append(("inputs agree: " if check["agree"] else "inputs DISAGREE: ") + check["detail"])
    mem = {}
    for m in facts.get("memory", []):
        mem[m["name"]] = m
    shown = []
    for name in ("weights", "activation_peak", "non_torch", "kv_available", "kv_reserved", "kv_tokens", "num_gpu_blocks",
                 "max_concurrency", "cuda_graph_estimate", "cuda_graph", "free_at_start", "total_gpu"):
        if name in mem:
            m = mem[name]
            unit = m["unit"]
            value = fmt_value(m["value"])
            shown.append(f"{name} {value}{'' if unit in ('ratio',) else ' ' + unit}")
    if shown:
        out.append("memory: " + ", ".join(shown))
    req = facts.get("requests_in_flight")
    if req:
        out.append(f"requests in flight at last report: {req.get('running')} running, {req.get('waiting')} waiting")
    for kill in facts.get("kernel_oom_kills", [])[-3:]:
        rss = f", anon-rss {kill['anon_rss_bytes'] / GiB:.2f} GiB" if kill.get("anon_rss_bytes") else ""
        out.append(f"kernel OOM kill: pid {kill['pid']} ({kill['name']}){rss}")
    for smi in facts.get("nvidia_smi", []):
        for g in smi.get("gpus", []):
            if g.get("peak_used_bytes") is not None and g.get("total_bytes"):
                out.append(f"nvidia-smi GPU {g['index']}: peak {g['peak_used_bytes'] / GiB:.2f} of "
                           f"{g['total_bytes'] / GiB:.2f} GiB ({len(g.get('steps', []))} large steps)")
    for note in facts.get("notes", []):
        out.append(f"note: {note}")
    return out


def render_json(diagnosis: Diagnosis, out: TextIO) -> None:
    json.dump(diagnosis.to_dict(), out, indent=2, default=str)
    out.write("\n")


def render_markdown(diagnosis: Diagnosis, out: TextIO, *, title: str = "oomguard diagnose", explain: bool = False) -> None:
    out.write(markdown_text(diagnosis.to_dict(), title=title, explain=explain))


def cue_lines(v: dict[str, Any], limit: int = 12) -> list[str]:
    """The scored cues of a verdict, one a line: '+6.00  sig:kv-too-small  vllm.log:12  (why)'."""
    out = []
    for c in v.get("cues", [])[:limit]:
        where = f"  {_where(c)}" if c.get("file") else ""
        out.append(f"{c['weight']:+.2f}  {c['feature']}{where}  ({c['why']})")
    family = v.get("family")
    if family:
        out.append(f"GPU-memory family {family['probability']:.2f}; phase within it (phase model): "
                   + ", ".join(f"{p['class']} {p['probability']:.2f}" for p in family["phase"]))
        for c in family.get("decided_by", []):
            out.append(f"phase {c['margin']:+.2f} vs {c['against']}  {c['feature']}  ({c['why']})")
    alts = v.get("alternatives") or []
    if alts:
        out.append("next most likely: " + ", ".join(f"{a['class']} {a['probability']:.2f}" for a in alts))
    return out


def _tier_note(v: dict[str, Any]) -> str:
    """How specific the evidence is (classifier: the tiers), and whose code raised the error when known."""
    note = {"paraphrase": ", lower confidence: from wording, not a vLLM message",
            "generic": ", lower confidence: a generic exception, not a vLLM message"}.get(v.get("tier", ""), "")
    return note + (f", raised in {v['component']} code" if v.get("component") else "")


def markdown_text(data: dict[str, Any], *, title: str = "oomguard diagnose", evidence_limit: int | None = None,
                  explain: bool = False) -> str:
    lines = [f"# {title}", ""]
    verdicts = data["verdicts"]
    if not verdicts and data.get("incomplete"):
        lines += _incomplete_lines(data["incomplete"], "**Incomplete**: ") + [""]
    elif not verdicts and data.get("status") == "running":
        lines += ["**Running**: the server answered requests; no failure in this text.", ""]
    elif not verdicts:
        lines += ["**No failure found**: the inputs show no error oomguard recognises (a clean start).", ""]
    for i, v in enumerate(verdicts, 1):
        tier = _tier_note(v)
        lines.append(f"## {i}. `{v['class']}` (confidence {v['confidence']:.2f}, phase {v['phase']}{tier})")
        lines += ["", v["summary"], ""]
        for n in v.get("numbers", []):
            lines.append(f"- {n}")
        if v.get("numbers"):
            lines.append("")
        if v["fix"]:
            lines.append("**Fix**")
            lines.append("")
            shared = shared_not_checked(v["fix"])
            for f in v["fix"]:
                effect = f" (predicted: {f['effect']})" if f.get("effect") else ""
                if f.get("checked") and not f.get("effect") and not shared:
                    effect = f" (planner: {f['checked']})"
                lines.append(f"- `{fix_text(f)}`: {f['why']}{effect}")
            if shared:
                lines.append(f"- planner: {shared}")
            lines.append("")
        if v.get("settle"):
            lines += [f"*What would settle it*: {v['settle']}", ""]
        if explain and v.get("cues"):
            lines += ["**Why** (the cues scored for this class: weight, feature, line)", "", "```"]
            lines += cue_lines(v)
            lines += ["```", ""]
        if explain and any(f.get("chosen") for f in v["fix"]):
            lines += ["**Fix order** (why each fix is where it is)", ""]
            lines += [f"- `{fix_text(f)}`: {f['chosen']}" for f in v["fix"] if f.get("chosen")]
            lines.append("")
        evidence = v["evidence"][:evidence_limit] if evidence_limit else v["evidence"]
        if evidence:
            lines.append("**Evidence**")
            lines.append("")
            lines.append("```")
            for e in evidence:
                lines.append(f"{_where(e)}: {e['text']}")
            lines.append("```")
            lines.append("")
    lines.append("## Facts")
    lines.append("")
    for fact in _fact_line(data):
        lines.append(f"- {fact}")
    lines += ["", "## Inputs", ""]
    for inp in data["inputs"]:
        notes = f" ({'; '.join(inp['notes'])})" if inp["notes"] else ""
        lines.append(f"- `{inp['file']}`: {inp['kind']}, {inp['lines']} lines{notes}")
    lines.append("")
    return "\n".join(lines)


def render_text(diagnosis: Diagnosis, out: TextIO, *, explain: bool = False) -> None:
    from rich.console import Console
    from rich.markup import escape

    data = diagnosis.to_dict()
    console = Console(file=out, highlight=False, soft_wrap=True)
    verdicts = data["verdicts"]
    if not verdicts and data.get("incomplete"):
        for i, text in enumerate(_incomplete_lines(data["incomplete"], "")):
            console.print(f"[bold yellow]{escape(text)}[/]" if i == 0 else escape(text))
    elif not verdicts and data.get("status") == "running":
        console.print("[bold green]Running[/]: the server answered requests; no failure in this text.")
    elif not verdicts:
        console.print("[bold green]No failure found[/]: no error oomguard recognises (a clean start).")
    else:
        console.print(f"[bold]{len(verdicts)} failure(s) found[/], most likely root cause first:")
    for i, v in enumerate(verdicts, 1):
        console.print()
        tier = _tier_note(v)
        console.print(f"[bold red]{i}. {v['class']}[/]  [dim](confidence {v['confidence']:.2f}, phase {v['phase']}{tier})[/]")
        console.print(f"   {escape(v['summary'])}")
        for n in v.get("numbers", []):
            console.print(f"   [cyan]numbers:[/] {escape(n)}")
        shared = shared_not_checked(v["fix"])
        for f in v["fix"]:
            effect = f" [green](predicted: {escape(f['effect'])})[/]" if f.get("effect") else ""
            if f.get("checked") and not f.get("effect") and not shared:
                effect = f" [green](planner: {escape(f['checked'])})[/]"
            console.print(f"   [bold green]fix:[/] [bold]{escape(fix_text(f))}[/]  [dim]{escape(f['why'])}[/]{effect}")
        if shared:
            console.print(f"   [yellow]planner:[/] {escape(shared)}")
        for e in v["evidence"]:
            console.print(f"   [yellow]{escape(_where(e))}[/] {escape(e['text'][:300])}")
        if v.get("settle"):
            console.print(f"   [cyan]would settle it:[/] {escape(v['settle'])}")
        if explain:
            for text in cue_lines(v):
                console.print(f"   [magenta]why:[/] {escape(text)}")
            for f in v["fix"]:
                if f.get("chosen"):
                    console.print(f"   [magenta]fix order:[/] {escape(fix_text(f))}: {escape(f['chosen'])}")
    console.print()
    for fact in _fact_line(data):
        console.print(f"[dim]{escape(fact)}[/]")
    for inp in data["inputs"]:
        notes = f" — {'; '.join(inp['notes'])}" if inp["notes"] else ""
        console.print(f"[dim]input {escape(inp['file'])}: {inp['kind']}, {inp['lines']} lines{escape(notes)}[/]")
