"""OG5xx: context length against the model — derived maximum, YaRN / RoPE scaling, M-RoPE.

vLLM derives the longest context a model supports from its config
(``max_position_embeddings``, scaled by some RoPE types) and refuses a longer
``--max-model-len`` unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``. RoPE scaling
applied through the launch (``--hf-overrides`` / the old ``--rope-scaling``)
changes the positions the model can tell apart, for every request.
"""

from __future__ import annotations

import math

from oomguard.check.context import rope_override
from oomguard.check.finding import Severity
from oomguard.check.needs import Needs
from oomguard.check.rule import rule
from oomguard.model.failures import FailureClass as F

_YARN = ("yarn", "deepseek_yarn")


def _effective_rope(ctx) -> tuple[dict | None, str]:
    """(rope dict, where it comes from) — the launch's override wins over the config's."""
    over = rope_override(ctx.flags, ctx.launch)
    if over is not None:
        return over, "launch"
    return ctx.model.rope_scaling, "config"


def _rtype(rope: dict | None) -> str:
    if not rope:
        return ""
    return str(rope.get("rope_type") or rope.get("type") or "")


def _rope_edit(ctx, new_rope: dict):
    """Set RoPE scaling the way this release spells it (--hf-overrides, or --rope-scaling on ≤ 0.11.0)."""
    if ctx.has_flag("hf_overrides"):
        from oomguard.check.context import json_value

        hf = json_value(ctx.flags.get("hf_overrides"))
        hf = dict(hf) if isinstance(hf, dict) else {}
        hf["rope_scaling"] = new_rope
        hf.pop("rope_parameters", None)
        return ctx.edit("hf_overrides", hf)
    return ctx.edit("rope_scaling", new_rope)


@rule(
    "OG501",
    "max-model-len-exceeds-model",
    title="max-model-len above the model's derived maximum",
    severity=Severity.ERROR,
    why="""vLLM derives the longest context from the model config (`max_position_embeddings`, times
    the RoPE factor for some scaling types; from 0.30 YaRN's `max_position_embeddings` is taken
    as already scaled) and refuses a longer `--max-model-len` ("User-specified max_model_len (L) is
    greater than the derived max_model_len (D)") unless `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` is set.
    The variable is right when RoPE scaling makes the longer context valid; otherwise the model
    was not trained for the positions beyond D.""",
    fix="""`VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` when the effective RoPE scaling (launch or config) reaches
    `--max-model-len` (`original_max_position_embeddings × factor ≥ L`); else, when the model's card
    publishes a YaRN recipe that reaches it, that recipe with the factor the length needs (and the
    variable where the release still requires it): the length the launch asked for is kept. Otherwise
    `--max-model-len` set to the derived maximum; never the variable alone.""",
    example="vllm serve Qwen/Qwen3-8B --max-model-len 131072",
    use_instead="""VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 vllm serve Qwen/Qwen3-8B --max-model-len 131072 --hf-overrides '{"rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}}'""",
    predicts=(F.MAX_LEN_EXCEEDS_MODEL,),
)
def len_exceeds(ctx):
    r = len_exceeds.rule
    plan = ctx.plan
    if plan.failure is not F.MAX_LEN_EXCEEDS_MODEL:
        return
    from oomguard.model.engine import derive_len

    L = plan.settings.max_model_len
    derived = derive_len(ctx.model_for(ctx.flags), plan.settings.version)
    from oomguard.model.overrides import rope_reach

    rope, src = _effective_rope(ctx)
    reach = rope_reach(ctx.model_for(ctx.flags)) if rope else None
    elsewhere = ctx.launch.env_from.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN")
    if reach is not None and reach >= L and elsewhere is not None:
        # set from a Secret / ConfigMap: it has a value oomguard cannot read; the launch starts if that value is 1
        fix = []
        how = (f" The {_rtype(rope)} scaling ({src}) reaches {reach:,} ≥ {L:,}: it starts when VLLM_ALLOW_LONG_MAX_MODEL_LEN, "
               f"set from {elsewhere.source}, is 1 (a value not known here; the plan took it as unset).")
    elif reach is not None and reach >= L:
        fix = [ctx.edit("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")]
        how = f" The {_rtype(rope)} scaling ({src}) reaches {reach:,} ≥ {L:,}: set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    else:
        from oomguard.fit.rope import yarn_recipe

        recipe, why = yarn_recipe(ctx.model, L) if rope is None else (None, "the launch's RoPE scaling does not reach it")
        if recipe is not None:
            # keep the length the launch asked for, the way the model's authors publish it
            from oomguard.model.planner import apply_overrides

            fix = [_rope_edit(ctx, recipe)]
            flags, _ = ctx.edited(fix)
            needs_env = derive_len(apply_overrides(ctx.model, flags), plan.settings.version) < L
            if needs_env:
                fix.append(ctx.edit("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1"))
            how = (
                f" Nothing in the config scales the positions that far; the model's own recipe does ({why}): add YaRN factor "
                f"{recipe['factor']:g} over {recipe['original_max_position_embeddings']:,} tokens"
                + (" and VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which this release needs next to it." if needs_env else ".")
                + " A static factor also scales short requests (OG503)."
            )
        else:
            fix = [ctx.edit("max_model_len", derived)]
            how = f" Nothing scales the positions that far ({why}): use --max-model-len {derived:,}."
    yield r.finding(
        ctx,
        f"--max-model-len {L:,} is above the {derived:,} vLLM {ctx.version_label} derives from {ctx.model.name}'s config: vLLM refuses to start." + how,
        dests=["max_model_len"],
        fix=fix,
        numbers={"max_model_len": L, "derived_max_model_len": derived, "rope_reach": reach},
    )


@rule(
    "OG502",
    "yarn-factor-short-of-max-model-len",
    title="YaRN factor does not reach max-model-len",
    severity=Severity.WARNING,
    why="""YaRN stretches the positions the model was trained on
    (`original_max_position_embeddings`) by `factor`. Beyond `original × factor` the model sees
    positions it cannot tell apart and quality falls off, even though vLLM serves them (with
    `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`).""",
    fix="""A factor of `max-model-len / original_max_position_embeddings`, rounded up to 0.5, in the
    launch's RoPE override.""",
    example="""--max-model-len 750000 --hf-overrides '{"rope_scaling":{"rope_type":"yarn","factor":2.0,"original_max_position_embeddings":262144}}'""",
    use_instead="""--max-model-len 750000 --hf-overrides '{"rope_scaling":{"rope_type":"yarn","factor":3.0,"original_max_position_embeddings":262144}}'""",
    needs=(Needs.MODEL,),
)
def yarn_short(ctx):
    r = yarn_short.rule
    rope, src = _effective_rope(ctx)
    if _rtype(rope) not in _YARN:
        return
    L = ctx.flags.get("max_model_len")
    if not isinstance(L, int) or L <= 0:
        return
    orig = int(rope.get("original_max_position_embeddings") or ctx.model.max_position_embeddings or 0)
    factor = float(rope.get("factor") or 1.0)
    if not orig or orig * factor >= L:
        return
    need = math.ceil(L / orig * 2) / 2
    new = dict(rope)
    new["factor"] = need
    yield r.finding(
        ctx,
        f"YaRN ({src}) covers {orig:,} × {factor:g} = {int(orig * factor):,} positions, short of --max-model-len {L:,}: "
        f"use factor {need:g} (or a shorter max-model-len).",
        dests=["max_model_len", "hf_overrides", "rope_scaling"],
        fix=[_rope_edit(ctx, new)],
        numbers={"original_max_position_embeddings": orig, "factor": factor, "reach": int(orig * factor), "suggested_factor": need},
    )


@rule(
    "OG503",
    "static-yarn-on-short-traffic",
    title="A static YaRN factor also scales short requests",
    severity=Severity.WARNING,
    why="""vLLM applies YaRN statically: every request, however short, runs with the stretched
    positions, which can cost short prompts quality. When most traffic is well under the model's
    native context, use a smaller factor or none, or run two instances routed by prompt length
    (one native for short prompts, one with YaRN for long ones).""",
    fix="""None automatic (it changes the deployment).""",
    example="""oomguard check start_api.sh --avg-input-len 8000   # YaRN ×3 over a 262,144 native context""",
    needs=(Needs.MODEL,),
)
def yarn_short_traffic(ctx):
    r = yarn_short_traffic.rule
    rope = rope_override(ctx.flags, ctx.launch)
    if _rtype(rope) not in _YARN or float(rope.get("factor") or 1.0) <= 1.0:
        return
    orig = int(rope.get("original_max_position_embeddings") or ctx.model.max_position_embeddings or 0)
    isl = ctx.options.avg_input_len
    short = isl is not None and orig and isl < orig
    if isl is not None and not short:
        return
    sev = Severity.WARNING if short else Severity.INFO
    what = f"your average input ({isl:,} tokens) is under the native {orig:,}" if short else f"if most requests are under the native {orig:,} tokens"
    yield r.finding(
        ctx,
        f"YaRN factor {rope.get('factor')} applies to every request; {what}, consider a smaller factor or none, "
        f"or two instances routed by prompt length (≤ {orig:,} tokens without YaRN, longer with it).",
        dests=["hf_overrides", "rope_scaling"],
        severity=sev,
        numbers={"factor": rope.get("factor"), "original_max_position_embeddings": orig, "avg_input_len": isl},
    )


@rule(
    "OG504",
    "yarn-on-mrope-model",
    title="M-RoPE model with a YaRN factor sized for plain RoPE",
    severity=Severity.WARNING,
    why="""Multimodal models with (interleaved) M-RoPE split the rotary dimensions into temporal,
    height and width sections. A YaRN factor stretches each section's frequencies, and the
    temporal section carries the text positions with fewer dimensions than plain RoPE: the same
    target length needs a smaller factor, and the model's card should be followed.""",
    fix="""None automatic: check the model card's recommended factor.""",
    example="""vllm serve Qwen/Qwen3-VL-8B-Instruct --hf-overrides '{"rope_scaling":{"rope_type":"yarn","factor":4.0,...}}'""",
    needs=(Needs.MODEL,),
)
def yarn_mrope(ctx):
    r = yarn_mrope.rule
    rope = rope_override(ctx.flags, ctx.launch)
    if not ctx.model.mrope or _rtype(rope) not in _YARN:
        return
    yield r.finding(
        ctx,
        f"{ctx.model.name} uses M-RoPE: YaRN factor {rope.get('factor')} stretches its temporal section more than plain RoPE would; "
        "use a smaller factor for the same target length (see the model card).",
        dests=["hf_overrides", "rope_scaling"],
        numbers={"factor": rope.get("factor")},
    )


@rule(
    "OG505",
    "rope-override-replaces-config",
    title="The launch's RoPE scaling replaces the model's own",
    severity=Severity.WARNING,
    why="""When the config already has RoPE scaling (e.g. Llama 3.1's `llama3` type), an override
    replaces it rather than adding to it: the model loses the scaling it was trained with.""",
    fix="""None automatic: keep the config's scaling unless the model card says otherwise.""",
    example="""vllm serve meta-llama/Llama-3.1-8B-Instruct --hf-overrides '{"rope_scaling":{"rope_type":"yarn","factor":2.0}}'""",
    needs=(Needs.MODEL,),
)
def rope_replaces(ctx):
    r = rope_replaces.rule
    over = rope_override(ctx.flags, ctx.launch)
    own = ctx.model.rope_scaling
    if not over or not own or _rtype(own) in ("", "default", "mrope") or over == own:
        return
    yield r.finding(
        ctx,
        f"the model's config has {_rtype(own)} scaling (factor {own.get('factor')}); the launch replaces it with {_rtype(over)} (factor {over.get('factor')}).",
        dests=["hf_overrides", "rope_scaling"],
        numbers={"config_rope": own, "launch_rope": over},
    )
