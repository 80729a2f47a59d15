"""check's side of the goal-keeping fix: ranked, plan-verified alternatives for a launch that will not start.

The ranking lives in ``oomguard.fit.goalfix`` (``fit --from`` uses the same
one, so both commands offer the same first choice). Here the context supplies
the planner, the goal (the launch's max-model-len, ``--concurrency`` and
``--avg-input-len``) and the other tenants, and the first option becomes the
edit ``--fix`` applies in place of the memory rules' own edits.
"""

from __future__ import annotations

from oomguard.check.finding import Finding, Severity

GOAL_RULE = "OG000"  # the pseudo-finding that carries the chosen option's edits to the fixer
MEMORY_FAMILIES = ("1", "2", "3")  # token budget, KV capacity, GPU budget: the goal fix replaces their edits


def goal_fixes(ctx, findings: list[Finding] = ()) -> list:
    """Ranked options (``oomguard.fit.goalfix.Option``) for the launch; [] when it starts, cannot be
    planned, or fails for a reason an engine edit does not cure.

    The other rules' fixes (a flag respelled, ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` for a YaRN length)
    are applied first: the memory failure they uncover is the one to cure."""
    plan = ctx.plan
    if plan is None or plan.starts:
        return []
    from oomguard.check.fixer import collect_edits
    from oomguard.fit.goalfix import Goal, goal_options

    others = collect_edits([f for f in findings if f.rule[2:3] not in MEMORY_FAMILIES])
    flags, env = ctx.edited(others) if others else (dict(ctx.flags), dict(ctx.env))
    base = ctx.plan_with(flags, env) if others else plan
    if base.starts:
        return []
    goal = Goal(plan.settings.max_model_len, ctx.options.concurrency, ctx.options.avg_input_len, user_length=ctx.is_set("max_model_len"))
    return goal_options(
        ctx.plan_with,
        flags,
        env,
        base,
        model=ctx.model,
        goal=goal,
        other_gpu_use_bytes=ctx.other_gpu_use_bytes,
    )


def option_text(ctx, option) -> str:
    """The option as the flags a person would type, spelled for this release."""
    return "; ".join(ctx.edit(d, v).describe() for d, v in option.edits)


def findings_for_fix(ctx, findings: list[Finding], options: list) -> list[Finding]:
    """The findings whose edits ``--fix`` applies: the first goal option in place of the memory rules' edits."""
    if not options:
        return findings
    best = options[0]
    # a flag another rule respells (--kv-cache-memory → --kv-cache-memory-bytes) keeps that rename
    renames = {e.dest: e.replaces for f in findings for e in f.fix if e.dest and e.replaces and e.value is not None}
    edits = [ctx.edit(d, v) for d, v in best.edits]
    edits = [e._replace(replaces=renames[e.dest]) if e.dest in renames else e for e in edits]
    carrier = Finding(
        rule=GOAL_RULE,
        severity=Severity.ERROR,
        title="fix that keeps the goal",
        message="",
        fix=edits,
        name="goal-fix",
    )
    # the memory errors are what the option cures; warnings keep their edits where the option sets nothing
    rest = [f for f in findings if not (f.rule[2:3] in MEMORY_FAMILIES and f.severity is Severity.ERROR)]
    return [carrier] + _without_length_edits(ctx, rest, best)


# The rule whose fixes only a max-model-len beyond the model's own maximum needs (a RoPE scaling, the env
# override of vLLM's length check); a flag respelled (--rope-scaling -> --hf-overrides, OG602) stays.
_LENGTH_RULES = {"OG501"}


def _without_length_edits(ctx, findings: list[Finding], best) -> list[Finding]:
    """An option that lowers max-model-len to within the model's derived maximum makes the length edits of
    the other rules moot: --fix used to add a YaRN --hf-overrides for 131,072 tokens to a launch it lowered
    to 27,648 (minimal diff: the written launch carries only what it needs)."""
    from oomguard.records import replace

    from oomguard.model.engine import derive_len

    plan = ctx.plan
    new_len = dict(best.edits).get("max_model_len")
    if plan is None or new_len is None:
        return findings
    try:
        native = derive_len(plan.model, plan.settings.version)
    except Exception:  # noqa: BLE001 - no derived length to compare with: keep every edit
        return findings
    if not native or int(new_len) > native:
        return findings
    return [replace(f, fix=[]) if f.rule in _LENGTH_RULES and f.fix else f for f in findings]


def options_to_dict(ctx, options: list) -> list[dict]:
    out = []
    for i, o in enumerate(options):
        d = o.to_dict()
        d["rank"] = i + 1
        d["flags"] = option_text(ctx, o)
        d["applied_by_fix"] = i == 0
        out.append(d)
    return out
