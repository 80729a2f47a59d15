"""The hook through which the memory model puts numbers on a fix.

``apply_plan(verdicts, plan)`` calls ``plan(verdict, fix)`` for every fix and
stores what it returns as ``fix.effect`` (e.g. "KV cache 12.3 -> 18.9 GiB,
max concurrency 2.1x -> 3.4x"). ``plan`` is any callable; diagnose itself
never imports the memory model, so parsing and classification work without
it.

``make_plan_callback`` builds such a callable from the CLI options when the
memory model offers one: it looks for
``oomguard.model.planner.predict_fix_effect(model, gpu, num_gpus, args, flag, value, vllm_version) -> str | None``
and returns None when that function is not there (yet).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oomguard.diagnose.events import Fix, Verdict

PlanCallback = Callable[[Verdict, Fix], "str | None"]


def apply_plan(verdicts: list[Verdict], plan: PlanCallback | None = None) -> list[Verdict]:
    """Attach predicted effects to every fix; a failing prediction leaves the fix as it was."""
    if plan is None:
        return verdicts
    for verdict in verdicts:
        for fix in verdict.fix:
            try:
                effect = plan(verdict, fix)
            except Exception:  # noqa: BLE001 - a prediction is a bonus; never lose the verdict over it
                effect = None
            if effect:
                fix.effect = str(effect)
    return verdicts


def make_plan_callback(
    *,
    model: str | None,
    gpu: str | None,
    num_gpus: int | None,
    args: dict[str, Any],
    vllm_version: str | None,
) -> PlanCallback | None:
    if not model or not gpu:
        return None
    try:
        from oomguard.model import planner  # type: ignore[attr-defined]
    except ImportError:
        return None
    predict = getattr(planner, "predict_fix_effect", None)
    if predict is None:
        return None
    # Resolve names here, at the I/O edge: the memory model itself only does arithmetic.
    from oomguard.errors import OomguardError
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.inputs.model_config import load_model

    try:
        model = load_model(model, allow_hub=False)
        gpu = lookup_gpu(gpu)
    except OomguardError:
        return None

    def plan(verdict: Verdict, fix: Fix) -> str | None:
        if not fix.flag.startswith("--") or fix.value is None or isinstance(fix.value, str) and fix.value.startswith("<"):
            return None
        return predict(model=model, gpu=gpu, num_gpus=num_gpus, args=args, flag=fix.flag, value=fix.value,
                       vllm_version=vllm_version)

    return plan
