"""Terminal view of a plan: a per-GPU ledger that adds up, the verdict, the log lines."""

from __future__ import annotations

from oomguard.units import GiB


def _g(b: float) -> str:
    return f"{b / GiB:,.2f}"


def kv_limit_text(plan) -> str:
    """The two length limits, named apart: what the KV pool holds (memory) and the model's maximum
    (positions, what vLLM derives from the config)."""
    from oomguard.model.engine import derive_len

    derived = derive_len(plan.model, plan.settings.version)
    upper = max(plan.settings.max_model_len, derived)
    kv = plan.max_fitting_len or 0
    held = (f"the KV pool holds one request of at least {kv:,} tokens" if kv >= upper
            else f"the KV pool holds one request of at most {kv:,} tokens")
    return f"{held}; the model's maximum length (derived max_model_len) is {derived:,}"


def render_plan(plan, *, explain: bool = False, notes: list[str] | None = None, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    if console is None:
        from oomguard.textwidth import output_width

        console = Console(highlight=False, width=output_width())
    from oomguard.model.engine import graphs_label

    s = plan.settings
    m = plan.model
    head = (
        f"[bold]{m.name}[/] on {plan.num_gpus}× {plan.gpu.name} ({_g(plan.gpu.total_bytes)} GiB)  "
        f"vLLM {'.'.join(map(str, s.version))} {s.engine}  TP {s.tensor_parallel_size} PP {s.pipeline_parallel_size}"
    )
    console.print(head)
    from oomguard.model.coverage import summary_lines

    cov = summary_lines(plan)
    if getattr(m, "coverage", "native") == "generic":
        console.print(f"[bold yellow]{cov[0]}[/]", markup=True, highlight=False)
        for line in cov[1:]:
            console.print(line, markup=False)
    else:
        console.print(f"[dim]{cov[0]}[/]")
    console.print(
        f"max_model_len {s.max_model_len:,} ({s.max_model_len_source})  max_num_batched_tokens {s.max_num_batched_tokens:,}  "
        f"max_num_seqs {s.max_num_seqs}  util {s.gpu_memory_utilization}  dtype {s.dtype}  kv dtype {s.kv_cache_dtype}  "
        f"{'eager' if s.enforce_eager else 'CUDA graphs ' + graphs_label(s.cudagraph_mode)}"
    )
    for r in plan.ranks:
        t = Table(title=f"per GPU (stage {r.stage})" if len(plan.ranks) > 1 else "per GPU", show_edge=False, pad_edge=False)
        t.add_column("term")
        t.add_column("GiB", justify="right")
        t.add_column("range", justify="right")
        t.add_column("how")
        t.add_row("card total", _g(r.total_bytes), "", plan.gpu.total_source)
        outside = getattr(plan, "outside_bytes", 0)
        if outside:
            t.add_row("  on the card before vLLM's snapshot", _g(outside), "", "CUDA context, other processes, early communicators: not charged, lower free memory")
        t.add_row("requested (× util)", _g(r.requested_bytes), "", f"ceil({_g(r.total_bytes)} × {s.gpu_memory_utilization})")
        for term in (r.weights, r.non_torch, r.activation, r.cuda_graph):
            rng = "" if term.exact else f"{_g(term.low or term.bytes)}–{_g(term.high or term.bytes)}"
            in_budget = term is not r.cuda_graph or (s.estimate_cudagraphs and r.kv_source == "profiled")
            label = "− " + term.name if in_budget else "  " + term.name + " (outside budget)"
            how = term.formula if explain else term.source
            if getattr(term, "calibration", None):
                how = f"{term.calibration}; uncalibrated {_g(term.uncalibrated_bytes or 0)} GiB" + f" — {how}"
            t.add_row(label, _g(term.bytes), rng, how)
        if getattr(r, "reserved_bytes", 0):
            t.add_row("− multimodal IPC reservation", _g(r.reserved_bytes), "", "--mm-ipc-gpu-memory-gb (multimodal/gpu_ipc_memory.py)")
        pool_how = r.kv_source
        moved = sum(term.bytes - (term.uncalibrated_bytes or term.bytes) for term in (r.weights, r.non_torch, r.activation, r.cuda_graph)
                    if getattr(term, "calibration", None) and (term is not r.cuda_graph or s.estimate_cudagraphs))
        if moved and r.kv_source == "profiled":
            # a profiled pool is what the budget leaves: it moves the other way by what the calibrated terms moved
            pool_how = f"{r.kv_source}; {_g(r.kv_bytes + moved)} uncalibrated"
        t.add_row("[bold]= KV cache pool[/]", f"[bold]{_g(r.kv_bytes)}[/]", "", pool_how)
        console.print(t)
    console.print(
        f"KV: {plan.kv_bytes_per_token:,.0f} B/token/GPU, block {plan.block_size} tokens, {len(plan.layout.groups)} group(s), "
        f"{plan.num_gpu_blocks:,} blocks; one {s.max_model_len:,}-token request needs {_g(plan.one_request_bytes)} GiB; "
        + kv_limit_text(plan)
    )
    if plan.starts:
        console.print(f"[green bold]STARTS[/]: {plan.kv_cache_tokens:,} tokens of KV cache, {plan.max_concurrency:.2f}x concurrency at {s.max_model_len:,} tokens")
    else:
        console.print(f"[red bold]WILL NOT START[/] ({plan.failure.value}): {plan.error}")
    if plan.log_lines:  # a launch that fails before its first memory line logs none of them
        console.print("[dim]vLLM will log:[/]")
    for line in plan.log_lines:
        console.print(f"  {line}", markup=False)
    for msg in list(plan.messages) + list(notes or []):
        console.print(f"[yellow]note:[/] {msg}")
