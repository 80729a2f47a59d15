"""Plain-text views: the findings report, and one rule's documentation (``--explain``).

Pure functions returning strings (the CLI prints them), so tests can assert the
exact output.
"""

from __future__ import annotations

import textwrap

from oomguard.units import GiB

def _wrap(text: str, indent: str = "    ") -> str:
    from oomguard.textwidth import output_width

    return textwrap.fill(text, width=output_width(), initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)


def _where(f) -> str:
    if f.file and f.line:
        return f"{f.file}:{f.line}"
    if f.file:
        return f.file
    return "command"


def render_run(run, *, show_diff: bool = True, verbose: bool = False) -> str:
    """Several launches of one file (Helm modelSpecs, vLLM containers): each one's report, then the
    one corrected file that holds every launch's fix."""
    parts = []
    for rep in run.reports:
        parts.append(f"== {rep.ctx.launch.name} ==\n" + render_report(rep, show_diff=show_diff, verbose=verbose, show_fix=False))
    errors = sum(len(r.errors) for r in run.reports)
    warnings = sum(len(r.warnings) for r in run.reports)
    tail = [f"{len(run.reports)} launches: {errors} error(s), {warnings} warning(s)"]
    fixed = run.fixed_text
    if fixed is not None:
        target = run.fixed_path()
        tail.append("corrected file" + (f" (--fix writes {target})" if target else "") + ":")
        tail.append((run.diff() if show_diff else fixed).rstrip("\n"))
    return "\n".join(parts) + "\n" + "\n".join(tail) + "\n"


def render_report(report, *, show_diff: bool = True, verbose: bool = False, show_fix: bool = True) -> str:
    ctx = report.ctx
    out: list[str] = []
    head = [f"vLLM {ctx.release.version}"]
    if ctx.model is not None:
        head.append(ctx.model.name)
    if ctx.gpu is not None:
        n = ctx.plan.num_gpus if ctx.plan is not None else (ctx.num_gpus or 1)
        head.append(f"{n}× {ctx.gpu.name} ({ctx.gpu.total_bytes / GiB:.2f} GiB)")
    out.append("oomguard check: " + ", ".join(head))
    plan = ctx.plan
    if plan is not None:
        refused = report.refused_by
        if plan.starts and refused:
            what = ", ".join(sorted({f"{f.rule} {f.name}" for f in refused}))
            verdict = (f"predicted NOT to start: vLLM {ctx.release.version} rejects the command line ({what}, below); "
                       f"with that fixed the memory plan starts: {plan.kv_cache_tokens:,} tokens of KV cache, "
                       f"{plan.max_concurrency:.2f}x at {plan.settings.max_model_len:,} tokens")
        elif plan.starts:
            verdict = f"predicted to start: {plan.kv_cache_tokens:,} tokens of KV cache, {plan.max_concurrency:.2f}x at {plan.settings.max_model_len:,} tokens"
        else:
            verdict = f"predicted NOT to start ({plan.failure.value}): {plan.error}"
        out.append(_wrap(verdict, ""))
    out.append("")
    for f in report.findings:
        out.append(f"{_where(f)}: {f.severity.value} {f.rule} {f.name}: {f.title}")
        out.append(_wrap(f.message))
        if f.fix:
            replaced = report.goal_fixes and f.rule[2:3] in ("1", "2", "3") and f.severity.value != "info"
            out.append(_wrap(("this rule's own fix: " if replaced else "fix: ") + "; ".join(e.describe() for e in f.fix)
                             + (" (--fix applies the goal-keeping fix #1 below instead)" if replaced else "")))
    if not report.findings:
        out.append("no findings")
    n_err, n_warn = len(report.errors), len(report.warnings)
    n_info = len(report.findings) - n_err - n_warn
    out.append("")
    out.append(f"{n_err} error(s), {n_warn} warning(s), {n_info} info" + (f"; {len(report.result.ignored)} ignored" if report.result.ignored else ""))
    if report.goal_fixes:
        from oomguard.check.goal import option_text
        from oomguard.fit.goalfix import summary

        out.append("")
        kept = report.goal_fixes[0].keeps_goal
        out.append(
            "fixes that keep the goal, ranked and each re-planned (--fix applies #1):"
            if kept
            else f"nothing keeps --max-model-len {ctx.plan.settings.max_model_len:,}: these lower it, ranked and each re-planned (--fix applies #1):"
        )
        for i, o in enumerate(report.goal_fixes, 1):
            out.append(_wrap(f"#{i} {option_text(ctx, o)}", "  "))
            out.append(_wrap(summary(o), "      "))
    fx = report.fix
    if fx is not None and fx.changed and show_fix:
        out.append("")
        target = report.fixed_path()
        out.append("corrected launch" + (f" (--fix writes {target})" if target else "") + ":")
        if fx.followups:
            out.append("with these fixes applied, further findings appeared and are fixed too:")
            for f in fx.followups:
                out.append(f"  {f.severity.value} {f.rule} {f.name}: {f.title}")
                out.append(_wrap(f.message))
                out.append(_wrap("fix: " + "; ".join(e.describe() for e in f.fix)))
        if show_diff:
            out.append(fx.diff(target).rstrip("\n"))
        else:
            out.append(fx.text.rstrip("\n"))
        if fx.remaining:
            out.append(_wrap("the corrected launch still has errors: " + ", ".join(f"{f.rule} {f.name}" for f in fx.remaining), ""))
        elif fx.starts is not None:
            out.append("the corrected launch passes oomguard check" + (" and is predicted to start." if fx.starts else " but is NOT predicted to start."))
        for n in fx.notes:
            out.append(_wrap("note: " + n, ""))
    for n in report.notes:
        out.append(_wrap("note: " + n, ""))
    if report.result.skipped:
        by_reason: dict[str, list[str]] = {}
        for rid, why in report.result.skipped.items():
            by_reason.setdefault(why, []).append(rid)
        for why, ids in by_reason.items():
            if verbose or len(ids) > 1 or "topology" not in why:
                out.append(_wrap(f"skipped {len(ids)} rule(s) ({', '.join(ids) if verbose else ids[0] + ('…' if len(ids) > 1 else '')}): {why}", ""))
    return "\n".join(out) + "\n"


def render_rule(r) -> str:
    sev = r.severity.value
    lines = [
        f"{r.id} {r.name} ({sev})",
        f"{r.title}",
        f"family: OG{r.family.value}xx {r.family.title}",
        "",
        "Why:",
        _wrap(r.why, "  "),
        "",
        "Fix:",
        _wrap(r.fix_text, "  "),
    ]
    if r.example:
        lines += ["", "Example:", textwrap.indent(r.example, "  ")]
    if r.use_instead:
        lines += ["", "Use instead:", textwrap.indent(r.use_instead, "  ")]
    if r.predicts:
        lines += ["", "Foretells: " + ", ".join(r.predicts)]
    return "\n".join(lines) + "\n"


def render_rule_list(rules) -> str:
    out = []
    for r in rules:
        out.append(f"{r.id}  {r.severity.value:7}  {r.name:40}  {r.title}")
    return "\n".join(out) + "\n"

