"""Terminal view of a fit result (rich, imported lazily)."""

from __future__ import annotations

from oomguard.units import GiB


def _g(n: float) -> str:
    return f"{n / GiB:.2f}"


def _candidate(console, i: int, c, *, from_launch: bool) -> None:
    from rich.markup import escape

    p = c.plan
    s = c.summary
    title = f"[bold]#{i}[/]"
    if from_launch:
        if c.edit:
            title += "  edit: " + escape("; ".join(ch.describe() for ch in c.edit))
        else:
            title += "  no edit needed: the launch already fits"
    console.print(title)
    # one flag per line reads better in a terminal; the JSON keeps the one-line command
    console.print("  " + escape(c.command.replace(" --", " \\\n      --")), soft_wrap=True)
    console.print(
        f"  [green]starts[/]: KV {p.kv_cache_tokens:,} tokens, max-model-len {s['max_model_len']:,}, "
        f"{s['capacity_at_input_len']:,} request(s) of {s['input_len']:,} tokens; peak ≈ {s['peak_gib']} GiB per GPU, "
        f"{s['margin_gib']} GiB left free" + ("" if s["robust"] else "  [yellow](thin: within the estimate's error)[/]")
    )
    for t in c.tradeoffs:
        console.print("   • " + escape(t))


def render_fit(result, *, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape

    if console is None:
        from oomguard.textwidth import output_width

        console = Console(highlight=False, width=output_width())
    g = result.goal
    goal = []
    if g.get("max_context"):
        goal.append("the largest max-model-len" + (f" up to {g['max_model_len']:,}" if g.get("max_model_len") else ""))
    elif g.get("max_model_len"):
        goal.append(f"max-model-len {g['max_model_len']:,} ({g['length_from']})")
    if g.get("concurrency"):
        goal.append(f"{g['concurrency']} concurrent requests of {g.get('avg_input_len') or 'max-model-len'} tokens")
    console.print(
        f"[bold]oomguard fit[/]: {escape(str(g['model']))} on {g['num_gpus']}× {g['gpu']}, vLLM {g['vllm_version']}, "
        f"objective {g['objective']}" + (f"; goal: {', '.join(goal)}" if goal else "")
    )
    rate = result.searched / result.elapsed_s if result.elapsed_s > 0 else 0.0
    console.print(f"[dim]searched {result.searched:,} launches in {result.elapsed_s * 1000:.0f} ms ({rate:,.0f}/s)[/]")
    lp = result.launch_plan
    if lp is not None:
        if result.rejected_flags:
            refused = ", ".join(result.rejected_flags)
            plan = (f"starts ({lp.kv_cache_tokens:,} tokens of KV)" if lp.starts
                    else f"does not start either ({lp.failure.value})")
            console.print(f"the launch as written: [red bold]WILL NOT START[/]: vLLM {escape(str(g['vllm_version']))} rejects "
                          f"the command line ('unrecognized arguments: {escape(refused)}'); without it the memory plan {plan}")
        elif lp.starts:
            console.print(f"the launch as written: [green]starts[/] ({lp.kv_cache_tokens:,} tokens of KV)")
        else:
            console.print(f"the launch as written: [red bold]WILL NOT START[/] ({lp.failure.value}): {escape(lp.error or '')}")
    if result.cpu_tier:
        console.print("[bold]CPU tier[/]")
        for line in result.cpu_tier["lines"]:
            console.print("   • " + escape(line))
    if result.candidates:
        for i, c in enumerate(result.candidates, 1):
            _candidate(console, i, c, from_launch=result.from_launch)
    else:
        console.print("[red bold]no launch meets the goal[/]")
        if result.rejected:
            top = ", ".join(f"{k} ×{v:,}" for k, v in list(result.rejected.items())[:6])
            console.print(f"  rejected: {escape(top)}")
        if result.closest:
            console.print("[bold]closest launches if the length is relaxed[/]")
            for i, c in enumerate(result.closest, 1):
                _candidate(console, i, c, from_launch=result.from_launch)
    if result.checkpoints:
        console.print("[bold]quantized checkpoints of the same model[/] (same goal; weigh the accuracy cost)")
        for i, c in enumerate(result.checkpoints, 1):
            _candidate(console, i, c, from_launch=False)
    for n in result.notes:
        console.print(f"[yellow]note:[/] {escape(n)}")
