"""OG0xx: what the check could not look at.

"No findings" is a claim about every rule. When the model or the GPU is
missing (or the model's architecture is one the planner does not model), the
memory rules cannot run; this family says so as a finding, names the rules
and what to pass, and makes ``check`` exit non-zero instead of reporting a
clean launch. Optional evidence (``--topo``, ``--host-ram-gib``) does not count:
rules that only sharpen with it say so themselves.
"""

from __future__ import annotations

from oomguard.check.finding import Severity
from oomguard.check.needs import Needs
from oomguard.check.rule import rule

# Inputs without which the memory rules cannot run at all (topology is optional evidence).
_ESSENTIAL = (Needs.MODEL, Needs.GPU, Needs.PLAN)


def not_run(ctx) -> dict[str, str]:
    """Rule id -> why it cannot run on this launch, for the essential inputs only."""
    out = {}
    for r in ctx.rules:
        essential = [n for n in r.needs if n in _ESSENTIAL]
        if not essential:
            continue
        why = ctx.missing(essential)
        if why:
            out[r.id] = why
    return out


def what_to_pass(ctx) -> list[str]:
    """The options that would let the skipped rules run."""
    out = []
    if ctx.model is None and not ctx.model_unsupported:
        out.append("--model PATH/config.json (or an HF id in the local cache or the bundled catalog)")
    if ctx.gpu is None:
        out.append("--gpu NAME (or --gpu-memory-gib X, or --nvidia-smi FILE)")
    return out


@rule(
    "OG001",
    "rules-not-run",
    title="Memory rules could not run: the check is incomplete",
    severity=Severity.WARNING,
    needs=(),
    why="""A check that skips its memory rules and prints "no findings" reads like a clean bill
    of health for a launch that may not start: without the model's config the token-budget, KV
    capacity and GPU-budget rules cannot compute anything. This finding lists the rules that did
    not run and what to pass so they can; while it is present `check` exits 3 (could not
    complete), with or without `--strict`, unless an error finding makes it 1.""",
    fix="""Pass what is missing: `--model PATH/config.json` (or an HF id in the local cache or the
    bundled catalog) when the launch's model path is not on this machine, and `--gpu NAME`. For an
    architecture oomguard does not model yet, the flag, version, host and syntax rules still run.""",
    example="oomguard check start_api.sh --gpu A100-80GB   # MODEL=/models/qwen-1m is not on this machine",
    use_instead="oomguard check start_api.sh --gpu A100-80GB --model ./qwen-1m/config.json",
)
def rules_not_run(ctx):
    r = rules_not_run.rule
    skipped = not_run(ctx)
    if not skipped:
        return
    reasons = sorted(set(skipped.values()))
    passes = what_to_pass(ctx)
    yield r.finding(
        ctx,
        f"{len(skipped)} memory rule(s) did not run ({', '.join(sorted(skipped))}): {'; '.join(reasons)}."
        + (" The flag, version, host and syntax rules ran; the memory rules wait for this architecture to be modelled."
           if ctx.model_unsupported else "")
        + (" Pass " + " and ".join(passes) + " to run them." if passes else "")
        + " This is not a clean result.",
        location=(ctx.launch.path, ctx.launch.command_line),
        numbers={"rules_not_run": sorted(skipped), "reasons": reasons, "pass": passes},
    )
