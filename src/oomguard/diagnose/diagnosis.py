"""The diagnose pipeline: inputs -> facts and signals -> verdicts with fixes.

``diagnose()`` is the library entry point used by ``oomguard diagnose`` and
``oomguard bundle``; it performs no printing. Its result serialises to the
JSON contract (``verdicts``, ``facts``, ``inputs``), with secrets redacted.
"""

from __future__ import annotations

from typing import Any

from oomguard.diagnose.classifier import classify
from oomguard.diagnose.context import Context, build_context
from oomguard.diagnose.events import Verdict
from oomguard.diagnose.facts import Collector
from oomguard.diagnose.fixes import attach_fixes
from oomguard.diagnose.incomplete import Incomplete, find_incomplete
from oomguard.diagnose.launch import Launch, parse_launch, read_launch_text
from oomguard.diagnose.planning import PlanCallback, apply_plan
from oomguard.diagnose.readers import InputReport, read_input
from oomguard.diagnose.redact import redact_obj
from oomguard.records import field, record


@record
class Diagnosis:
    verdicts: list[Verdict]
    collector: Collector
    context: Context
    inputs: list[InputReport] = field(default_factory=list)
    launch: Launch | None = None
    incomplete: Incomplete | None = None
    agreement: list[dict[str, Any]] = field(default_factory=list)
    # what the planner checked the fixes on (model, GPU, where each came from) or why it could not
    # (planning.check_diagnosis); None when it was not asked
    planner: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return bool(self.verdicts)

    @property
    def complete(self) -> bool:
        """False when a vLLM log stops before the server was ready with no error (exit 3)."""
        return self.incomplete is None

    @property
    def status(self) -> str:
        """"failed" (verdicts), "running" (the server answered requests, no failure), "clean" (a start-up that
        reached its ready line, or inputs with nothing wrong), "incomplete" (a start that stops early)."""
        from oomguard.diagnose.classes import Phase

        if self.verdicts:
            return "failed"
        if self.incomplete is not None:
            return "incomplete"
        if any(p >= Phase.SERVING for p in self.collector.paste_phase.values()) or \
                self.collector.phase_reached >= Phase.SERVING:
            return "running"
        return "clean"

    @property
    def readable(self) -> bool:
        """At least one input held something we could read."""
        return any(r.kind.value not in ("empty", "binary", "unreadable") for r in self.inputs) or not self.inputs

    def facts(self) -> dict[str, Any]:
        from oomguard.diagnose.story import merged_timeline

        facts = self.collector.to_dict()
        facts["timeline"] = merged_timeline(facts["timeline"])
        facts["agreement"] = list(self.agreement)
        facts["args"] = dict(self.context.args)
        facts["model"] = self.context.model
        facts["version"] = self.context.version
        if self.context.gpu_name or self.context.gpu_total_gib:
            facts["gpu"] = {"name": self.context.gpu_name, "total_gib": round(self.context.gpu_total_gib, 2)
                            if self.context.gpu_total_gib else None, "count": self.context.num_gpus}
        if self.context.exit_code is not None:
            facts["exit_code"] = self.context.exit_code
        if self.planner is not None:
            facts["planner"] = dict(self.planner)
        if self.launch is not None and self.launch.found:
            facts["launch"] = {"entrypoint": self.launch.entrypoint, "flags": self.launch.flags,
                               "env": sorted(self.launch.env)}
        return facts

    def to_dict(self) -> dict[str, Any]:
        return redact_obj({
            "status": self.status,
            "verdicts": [v.to_dict() for v in self.verdicts],
            **({"incomplete": self.incomplete.to_dict() | {"summary": self.incomplete.summary}}
               if self.incomplete else {}),
            "facts": self.facts(),
            "inputs": [r.to_dict() for r in self.inputs],
        })


def diagnose(
    paths: list[str],
    *,
    launch_text: str | None = None,
    model: str | None = None,
    gpu: str | None = None,
    num_gpus: int | None = None,
    vllm_version: str | None = None,
    exit_code: int | None = None,
    plan: PlanCallback | None = None,
    weights: Any = None,
) -> Diagnosis:
    """Read ``paths`` (``-`` is stdin) in order and classify what they show.

    Raises ``InputError`` for a missing or unreadable file; odd content (empty,
    binary, invalid UTF-8, huge lines) is reported in the inputs' notes instead.
    ``weights`` (a ``scoring.Weights``) replaces the shipped weights (cross-validation).
    """
    prepared = prepare(paths, launch_text=launch_text, model=model, gpu=gpu, num_gpus=num_gpus,
                       vllm_version=vllm_version, exit_code=exit_code)
    return conclude(prepared, plan=plan, weights=weights)


@record
class Prepared:
    """What was read, before any verdict: the collector, the context, the inputs and the launch."""

    collector: Collector
    context: Context
    inputs: list[InputReport]
    launch: Launch
    gpu_option: str | None = None


def prepare(paths: list[str], *, launch_text: str | None = None, model: str | None = None, gpu: str | None = None,
            num_gpus: int | None = None, vllm_version: str | None = None, exit_code: int | None = None) -> Prepared:
    """Read every input and build the context (no classification yet)."""
    col = Collector()
    reports = []
    launch_texts = [launch_text] if launch_text else []
    for path in paths:
        report, text = read_input(path, col)
        reports.append(report)
        if text:
            launch_texts.append(text)
    launch = Launch()
    for i, text in enumerate(launch_texts):
        # --launch goes through the one launch reader; launches quoted inside logs through the scan
        parsed = read_launch_text(text) if launch_text and i == 0 else parse_launch(text)
        if parsed.found:
            parsed.args.update({k: v for k, v in launch.args.items() if k not in parsed.args})
            parsed.flags = launch.flags + parsed.flags
            launch = parsed
    ctx = build_context(col, launch.args, launch.flags, model=model, gpu=gpu, num_gpus=num_gpus,
                        vllm_version=vllm_version, exit_code=exit_code)
    _model_config_facts(ctx)
    return Prepared(col, ctx, reports, launch, gpu)


def conclude(prepared: Prepared, *, plan: PlanCallback | None = None, weights: Any = None) -> Diagnosis:
    """Score the cues of ``prepared`` into verdicts with fixes (``prepared`` is not changed)."""
    col, ctx, reports, launch = prepared.collector, prepared.context, prepared.inputs, prepared.launch
    verdicts = classify(col, ctx, weights)
    attach_fixes(verdicts, col, ctx, votes=(weights or _shipped()).fix_votes)
    apply_plan(verdicts, plan)
    incomplete = find_incomplete(col, ctx, reports, bool(verdicts))
    from oomguard.diagnose.story import checks

    agreement = checks(col, ctx, launch, prepared.gpu_option)
    return Diagnosis(verdicts, col, ctx, reports, launch, incomplete, agreement)


def _shipped() -> Any:
    from oomguard.diagnose import scoring

    return scoring.load()


def _model_config_facts(ctx: Context) -> None:
    """What the model's config.json says (local directory, HF cache or the bundled catalog; never the Hub): a
    vision or audio tower, the attention heads (tensor parallelism must divide them), vLLM's derived maximum
    length. Left unset when no config can be read."""
    if not ctx.model:
        return
    from oomguard.inputs.model_config import load_model

    try:
        description = load_model(ctx.model, allow_hub=False)
    except Exception:  # noqa: BLE001 - any unreadable config: undecided, not a failure of diagnose
        from oomguard.diagnose.phase_facts import catalog_sibling

        sibling = catalog_sibling(ctx.model)
        try:
            description = load_model(sibling, allow_hub=False) if sibling else None
        except Exception:  # noqa: BLE001 - as above
            description = None
        if description is not None:
            # the same weights under another release name (base / instruct): their size only, for the phase
            _weights_facts(ctx, description)
        return
    ctx.config_multimodal = bool(description.is_multimodal)
    ctx.config_heads = description.num_attention_heads or None
    ctx.config_max_len = description.derived_max_model_len or None
    _weights_facts(ctx, description)


def _weights_facts(ctx: Context, description: Any) -> None:
    try:
        from oomguard.diagnose.phase_facts import largest_tensor_gib
        from oomguard.model.weights import model_weight_bytes

        quant = ctx.arg("quantization")
        ctx.config_weights_gib = model_weight_bytes(description, {"quantization": quant} if quant else None) / (1 << 30)
        ctx.config_largest_tensor_gib = largest_tensor_gib(description)
    except Exception:  # noqa: BLE001 - a config the weights model cannot size: the name's estimate stands
        ctx.config_weights_gib = ctx.config_largest_tensor_gib = None


def diagnose_paths(paths: list[str], **options: Any) -> Diagnosis:
    """Stable entry point for other commands (probe's ``--server-log``): ``diagnose`` plus the planner's check
    of every fix when the model and GPU resolve (from the options or the log).

    Read ``Diagnosis.verdicts`` (``cls``, ``confidence``, ``summary``, ``fix``), ``Diagnosis.incomplete``
    and ``Diagnosis.to_dict()`` (the JSON contract, redacted).
    """
    from oomguard.diagnose.planning import check_diagnosis

    diagnosis = diagnose(paths, **options)
    check_diagnosis(diagnosis, model=options.get("model"), gpu=options.get("gpu"), num_gpus=options.get("num_gpus"))
    return diagnosis
