"""Terminal view of a shared-GPU plan: the servers in start order, the verdict, and the splits that work."""

from __future__ import annotations

from oomguard.plan.shared_gpu import Option, SharedPlan
from oomguard.units import GiB


def _g(b: float) -> str:
    return f"{b / GiB:,.2f}"


def _flag(dest: str, value, version: str | None) -> str:
    from oomguard.inputs.render import flags_to_argv

    try:
        words = flags_to_argv(None, {dest: value}, version=version)
        return " ".join(w for w in words if w not in ("vllm", "serve"))
    except Exception:  # noqa: BLE001 - a spelling this release does not know: the dest is still clear
        return f"--{dest.replace('_', '-')} {value}"


def edits_text(edits: dict, version: str | None) -> str:
    parts = []
    for dest, value in edits.items():
        if value is None:
            parts.append(f"remove --{dest.replace('_', '-')}")
        elif dest == "kv_cache_memory_bytes":
            parts.append(f"{_flag(dest, value, version)} ({value / GiB:.2f} GiB)")
        else:
            parts.append(_flag(dest, value, version))
    return " ".join(parts) or "(as launched)"


def render_shared(sp: SharedPlan, console) -> None:
    from rich.table import Table

    names = ", ".join(o.server.name for o in sp.outcomes)
    console.print(f"[bold]Shared GPU set[/]: {sp.num_gpus}× {sp.gpu.name} ({_g(sp.gpu.total_bytes)} GiB each); start order: {names}",
                  highlight=False)
    t = Table(show_edge=False, pad_edge=False)
    for col in ("#", "server", "model", "util", "requested", "others at start", "free at start", "KV pool", "peak", "verdict"):
        t.add_column(col, justify="right" if col not in ("server", "model", "verdict") else "left")
    for i, o in enumerate(sp.outcomes, 1):
        d = o.to_dict()
        verdict = "starts" if o.starts else f"[red]FAILS[/]: {d['failure']}"
        if not o.starts and o.starts_if_idle:
            verdict += " (starts only while the others are idle)"
        t.add_row(str(i), o.server.name, _model_label(str(d["model"])), str(d["gpu_memory_utilization"]) + (" + pinned pool" if d["kv_cache_memory_bytes"] else ""),
                  f"{d['requested_gib']:.2f}", f"{d['others_at_start_gib']:.2f}", f"{d['free_at_start_gib']:.2f}",
                  f"{d['kv_cache_gib']:.2f}", f"{d['footprint_gib']:.2f}", verdict)
    console.print(t)
    for o in sp.outcomes:
        if o.why:
            console.print(f"  {o.server.name}: {o.why}", markup=False, highlight=False)
    style = "green" if sp.ok else "red"
    console.print(f"[{style} bold]{'FITS' if sp.ok else 'DOES NOT FIT'}[/]: {sp.verdict()}", highlight=False)
    for n in sp.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    if sp.options:
        console.print("[bold]Splits that let every server start with headroom (each re-planned in start order):[/]")
        for letter, opt in zip("ABCDEFG", sp.options):
            render_option(letter, opt, sp, console)


def render_option(letter: str, opt: Option, sp: SharedPlan, console) -> None:
    title = {"pinned": "pinned pools (--kv-cache-memory-bytes)", "utilization": "utilizations", "mig": "MIG instances",
             "none": "no split"}.get(opt.kind, opt.kind)
    mark = "[green]ok[/]" if opt.ok else "[red]not enough[/]"
    console.print(f" {letter}. {title}: {mark}", highlight=False)
    for i, o in enumerate(opt.outcomes):
        e = opt.edits[i] if i < len(opt.edits) else {}
        gpu = f" on {opt.gpus[i].name}" if opt.gpus else ""
        p = o.plan
        console.print(f"    {o.server.name}{gpu}: {edits_text(e, o.server.version)} → KV {_g(p.tight_rank.kv_bytes)} GiB = "
                      f"{p.kv_cache_tokens:,} tokens ({p.max_concurrency:.2f}x at {p.settings.max_model_len:,}), peak {_g(o.footprint_bytes)} GiB"
                      + ("" if o.starts else f", fails: {p.failure.value}"), markup=False, highlight=False)
    if opt.outcomes and not opt.gpus:
        console.print(f"    peaks {_g(opt.total_peak_bytes)} of {_g(sp.gpu.total_bytes)} GiB: {_g(opt.headroom_bytes)} GiB free "
                      f"(floor {_g(sp.margin_bytes)})", highlight=False)
    if opt.note:
        console.print(f"    {opt.note}", markup=False, highlight=False)


def _model_label(model: str) -> str:
    """A local model directory by its own name; a hub id as it is."""
    import os

    if model.startswith(("/", "./", "../")) or (model.count("/") > 1 and os.path.isdir(model)):
        return os.path.basename(model.rstrip("/")) or model
    return model
