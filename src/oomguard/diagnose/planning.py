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

from oomguard.diagnose.events import Fix, FixValue, Verdict

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
        if not fix.flag.startswith("--") or fix.value is None or isinstance(fix.value, FixValue) \
                or isinstance(fix.value, str) and fix.value.startswith("<"):
            return None
        text = predict(model=model, gpu=gpu, num_gpus=num_gpus, args=args, flag=fix.flag, value=fix.value,
                       vllm_version=vllm_version)
        return text + _generic_suffix(model) if text else text

    return plan


# --- fixes the planner has checked -------------------------------------------
_UTIL_STEP = 0.01
_UTIL_MAX = 0.98


class NotChecked(Exception):
    """The planner cannot check the fixes: the reason, said on every fix (``not checked: <why>``)."""


# Keys of vLLM's printed engine config / args that are not launch flags the planner reads.
_NOT_FLAGS = {"model", "model_tag", "served_model_name", "host", "port", "api_key", "device_config", "seed",
              "device", "disable_log_requests", "disable_log_stats", "uvicorn_log_level"}


def launch_flags(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments vLLM printed, as the planner's flags: its engine config spells types as ``torch.bfloat16``
    (every V1 log's "Initializing a V1 LLM engine ... dtype=torch.bfloat16") where the CLI says ``bfloat16``."""
    flags: dict[str, Any] = {}
    for key, value in args.items():
        dest = str(key).lstrip("-").replace("-", "_")
        if dest in _NOT_FLAGS or value is None:
            continue
        if isinstance(value, str) and value.startswith("torch."):
            value = value[len("torch."):]
        flags[dest] = value
    return flags


class PlanChecker:
    """Runs ``oomguard.model.planner.plan_launch`` on the launch that ran, with one fix applied.

    Built at the I/O edge (``make_checker``) from resolved model and GPU descriptions; the planner
    itself stays pure. ``other_gpu_bytes`` is memory other processes hold on the GPU (co-resident).
    """

    def __init__(self, plan_launch: Callable[..., Any], model: Any, gpu: Any, *, num_gpus: int | None,
                 args: dict[str, Any], vllm_version: str | None, other_gpu_bytes: int = 0) -> None:
        self._plan_launch = plan_launch
        self.model, self.gpu, self.num_gpus, self.version = model, gpu, num_gpus, vllm_version
        self.other_gpu_bytes = max(0, int(other_gpu_bytes))
        self.flags = launch_flags(args)
        self.notes: list[str] = []  # how the GPU was read (make_checker), said with what the planner ran on
        # whether num_gpus counts the machine's GPUs (--num-gpus, "4x A100", nvidia-smi) rather than the ones a
        # message happened to name
        self.gpus_counted = False

    def plan(self, edits: dict[str, Any] | None = None, *, num_gpus: int | None = None) -> Any:
        flags = dict(self.flags)
        for flag, value in (edits or {}).items():
            dest = flag.lstrip("-").replace("-", "_")
            if value is None:
                flags.pop(dest, None)
            else:
                flags[dest] = value
        return self._plan_launch(self.model, self.gpu, flags, version=self.version,
                                 num_gpus=num_gpus or self.num_gpus, other_gpu_use_bytes=self.other_gpu_bytes)


def _release(version: str | None) -> str | None:
    """A release the version tables know ("0.15.2rc1.dev93+g11a4c9d30" -> "0.15.2"), or None."""
    import re

    if not version:
        return None
    m = re.match(r"v?(\d+\.\d+(?:\.\d+)?)", version)
    return m.group(1) if m else None


def make_checker(*, model: str | None, gpu: str | None, gpu_total_gib: float | None, num_gpus: int | None,
                 args: dict[str, Any], vllm_version: str | None, other_gpu_gib: float = 0.0,
                 at_total: bool = False) -> PlanChecker:
    """A checker for the model (a local config or catalog id) and the GPU (a name or its size; ``at_total``: the
    named card at ``gpu_total_gib``, a size the log reports).

    Raises ``NotChecked`` with the reason when either does not resolve or the planner cannot plan the launch."""
    if not model:
        raise NotChecked("no model known (pass --model, or a log that names it)")
    if not (gpu or gpu_total_gib):
        raise NotChecked("no GPU known (pass --gpu, or a log with torch's OOM message or nvidia-smi)")
    from oomguard.errors import OomguardError
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.inputs.model_config import load_model
    from oomguard.model.planner import plan_launch

    try:
        described = load_model(model, allow_hub=False)
    except (OomguardError, OSError, ValueError) as exc:
        raise NotChecked(f"model {model!r} not readable offline ({str(exc).splitlines()[0][:160]})") from None
    gpu_desc = None
    problem = ""
    notes: list[str] = []
    for name, size in ((gpu, gpu_total_gib if at_total else None), (None, gpu_total_gib)):
        if name is None and size is None:
            continue
        try:
            gpu_desc = lookup_gpu(name, size)
            break
        except (OomguardError, ValueError) as exc:
            problem = str(exc).splitlines()[0][:160]
            notes.append(f"GPU {gpu!r} is not in the GPU table ({problem}): planned on torch's total instead")
    if gpu_desc is None:
        raise NotChecked(f"GPU {gpu!r} not in the GPU table ({problem})")
    checker = PlanChecker(plan_launch, described, gpu_desc, num_gpus=num_gpus, args=args,
                          vllm_version=_release(vllm_version), other_gpu_bytes=int(other_gpu_gib * (1 << 30)))
    checker.notes = notes if gpu_desc.name == "custom" else []
    return checker


def _state(p: Any) -> str:
    if p.starts:
        text = f"starts: {p.kv_cache_tokens:,} KV tokens, {p.max_concurrency:.2f}x at {p.settings.max_model_len:,}"
    else:
        text = f"fails: {p.failure.value if p.failure else 'does not start'}"
    return text + _generic_suffix(p.model)


def _generic_suffix(model: Any) -> str:
    """A planner verdict on the generic path says so (architectures/generic.py)."""
    from oomguard.model.coverage import mark

    m = mark(model)
    return f" [{m}]" if m else ""


def _checkable(fix: Fix) -> bool:
    if fix.flag == "--kv-cache-memory-bytes":
        return True  # a placeholder value is computed from the plan (co-resident processes)
    # a word value (--kv-cache-dtype fp8, --dtype half) is planned too; a "<placeholder>" is not a value
    return fix.flag.startswith("--") and (fix.value is None or isinstance(fix.value, (bool, int, float))
                                          or isinstance(fix.value, str) and bool(fix.value) and not fix.value.startswith("<"))


def _flag_exists(flag: str, version: str | None) -> bool:
    try:
        from oomguard.versions import get_release

        return get_release(version).has_option(flag)
    except Exception:  # noqa: BLE001 - no table for this version: do not claim the flag exists
        return False


def _kv_bytes_that_fit(checker: PlanChecker, before: Any) -> int | None:
    """The KV cache that fits next to the co-resident processes: free memory minus what vLLM itself needs
    besides the KV cache (weights, activation peak, non-torch, CUDA graphs), from the plan's ledger."""
    rank = before.tight_rank
    free = rank.total_bytes - checker.other_gpu_bytes
    need = rank.weights.bytes + rank.activation.bytes + rank.non_torch.bytes + rank.cuda_graph.bytes
    kv = free - need - (256 << 20)  # headroom for the CUDA context the ledger does not list per rank
    if kv <= 0:
        return None
    return int(kv // (1 << 27) * (1 << 27))  # down to 128 MiB steps


def check_fixes(verdicts: list[Verdict], checker: PlanChecker | None, *,
                estimated_max_len: int | None = None) -> list[Verdict]:
    """Give every flag fix the planner's verdict (``fix.checked``) and its predicted effect, and move a value
    the planner says fails to the nearest one it says starts: a shorter ``--max-model-len`` (never above
    vLLM's own estimated maximum), a ``--gpu-memory-utilization`` at which the weights load. A fix the planner
    could not evaluate says ``not checked: <why>``."""
    if checker is None:
        return verdicts
    try:
        before = checker.plan()
    except Exception as exc:  # noqa: BLE001 - a launch the planner cannot handle: every fix says why
        mark_not_checked(verdicts, f"the planner cannot plan this launch ({_why(exc)})")
        return verdicts
    for verdict in verdicts:
        for fix in verdict.fix:
            if not _checkable(fix):
                continue
            companion: dict[str, Any] = {}
            if fix.flag == "--kv-cache-memory-bytes":
                # vLLM still checks free memory against --gpu-memory-utilization at start-up (request_memory):
                # a pinned KV size is checked together with the utilization fix of the same verdict.
                companion = {f.flag: f.value for f in verdict.fix
                             if f.flag == "--gpu-memory-utilization" and isinstance(f.value, float)}
            try:
                _check_one(fix, checker, before, estimated_max_len, companion)
            except Exception as exc:  # noqa: BLE001 - one fix the planner cannot evaluate: it says so
                fix.checked = f"not checked: the planner cannot evaluate {fix.flag} {fix.value} ({_why(exc)})"
        # Fixes the planner says start come first (stable: the builders' order otherwise).
        verdict.fix.sort(key=lambda f: 1 if (f.checked or "").startswith("fails") else 0)
    return verdicts


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def mark_not_checked(verdicts: list[Verdict], why: str) -> None:
    for verdict in verdicts:
        for fix in verdict.fix:
            if _checkable(fix) and not fix.checked:
                fix.checked = f"not checked: {why}"


def _largest_kv_that_starts(checker: PlanChecker, upper: int, companion: dict[str, Any]) -> int | None:
    """The largest pinned KV size (128 MiB steps, down from ``upper``) the planner says starts; None when
    none does. Not a bisection: "starts" is not monotonic in the pool (too small a pool fails with
    kv-too-small, too large a one does not fit beside the other processes)."""
    step = 1 << 27
    for n in range(upper // step, 0, -1):
        if checker.plan({**companion, "--kv-cache-memory-bytes": n * step}).starts:
            return n * step
    return None


def _check_one(fix: Fix, checker: PlanChecker, before: Any, estimated_max_len: int | None,
               companion: dict[str, Any] | None = None) -> None:
    companion = companion or {}
    if fix.flag == "--kv-cache-memory-bytes" and not isinstance(fix.value, int):
        if not _flag_exists(fix.flag, checker.version):
            fix.checked = f"fails: vLLM {checker.version or '(this version)'} has no --kv-cache-memory-bytes"
            return
        kv = _kv_bytes_that_fit(checker, before)
        if kv is None:
            fix.checked = "fails: nothing is left for a KV cache next to the other processes"
            return
        fix.value = _largest_kv_that_starts(checker, kv, companion) or kv
        if companion:
            fix.why += " (with " + ", ".join(f"{k} {v}" for k, v in companion.items()) + ")"
    gpus = None
    if fix.flag == "--tensor-parallel-size" and isinstance(fix.value, int) and not checker.gpus_counted:
        # a report that does not count the machine's GPUs (torch's message names only the one that failed): the
        # fix is checked on as many as it asks for
        gpus = fix.value * int(checker.flags.get("pipeline_parallel_size") or 1)
        if gpus > (checker.num_gpus or 1):
            fix.why += f" (planned on {gpus} GPUs: the report does not say how many the machine has)"
        else:
            gpus = None
    after = checker.plan({**companion, fix.flag: fix.value}, num_gpus=gpus)
    if not after.starts and fix.flag == "--max-model-len" and isinstance(fix.value, int):
        cap = min(x for x in (fix.value, after.max_fitting_len, estimated_max_len) if x)
        if cap and cap < fix.value:
            trial = checker.plan({fix.flag: cap})
            if trial.starts:
                fix.why += f" (lowered from {fix.value:,} to {cap:,}: the largest the planner says starts)"
                fix.value, after = cap, trial
    if not after.starts and fix.flag == "--gpu-memory-utilization" and isinstance(fix.value, float):
        # Upwards only as far as the memory the GPU has free (co-resident processes included).
        ceiling = _UTIL_MAX
        total = getattr(checker.gpu, "total_bytes", 0)
        if total and checker.other_gpu_bytes:
            ceiling = min(ceiling, (total - checker.other_gpu_bytes) / total - _UTIL_STEP)
        value = round(fix.value + _UTIL_STEP, 2)
        while value <= ceiling + 1e-9:
            trial = checker.plan({fix.flag: value})
            if trial.starts:
                fix.why += f" (raised from {fix.value} to {value}: the lowest utilization at which the planner says it starts)"
                fix.value, after = value, trial
                break
            value = round(value + _UTIL_STEP, 2)
    fix.checked = _state(after)
    if not after.starts:
        fix.why += f" (the planner says the launch still fails with this change alone: {fix.checked[7:]})"
    if fix.effect is None:
        fix.effect = (f"KV pool {before.tight_rank.kv_bytes / (1 << 30):.2f} -> {after.tight_rank.kv_bytes / (1 << 30):.2f} "
                      f"GiB; {_state(before)} -> {_state(after)}")


# --- which model and GPU the planner checks on ----------------------------------
# Without --model / --gpu they come from the report itself (issue 16 item 4): the launch's or the log's model id
# (vLLM's engine config, its non-default args, the command), a model path matched by its folder name against the
# bundled catalog, the GPU nvidia-smi or torch's OOM message names, the card the report's words name. Each says
# where it came from (Diagnosis.planner); an unresolved or ambiguous name is said, never replaced by a guess.


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:160]


def _model_spec(spec: str) -> tuple[str, str]:
    """``spec`` as the planner reads it offline, with a note when it was matched by name; NotChecked otherwise."""
    from oomguard.errors import OomguardError
    from oomguard.inputs.model_config import catalog_ids, load_model

    try:
        load_model(spec, allow_hub=False)
        return spec, ""
    except (OomguardError, OSError, ValueError) as exc:
        why = _first_line(exc)
    name = spec.strip().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if name and name != spec.strip():
        # a path that is not on this machine (/models/Qwen3-8B) or another owner's copy (unsloth/Qwen3-8B): the
        # catalog model of exactly that name, when there is one and only one
        hits = [cid for cid in catalog_ids() if cid.split("/", 1)[-1].lower() == name.lower()]
        if len(hits) == 1:
            return hits[0], f"model {spec!r} is not readable here: planned as the catalog model {hits[0]} (same name)"
        if hits:
            raise NotChecked(f"model {spec!r}: its name {name!r} is ambiguous in the catalog ({' or '.join(hits)})")
    raise NotChecked(f"model {spec!r} not readable offline ({why})")


def resolve_model(option: str | None, ctx: Any, col: Any = None) -> tuple[str, str, list[str], dict[str, Any]]:
    """(the model spec, where it came from, notes, launch edits the stand-in needs): ``--model`` when given (one that
    does not resolve is said, never replaced by another), else the log or launch, else the model the report names in
    words; the first that resolves offline wins and each earlier one says why it did not. When none resolves, the
    first whose size the report states is planned on a sized stand-in (``sized_standin``), said as such."""
    candidates = [(option, "--model")] if option else [(ctx.model, "the log or launch"),
                                                       (ctx.mentioned_model, "the report's words")]
    notes: list[str] = []
    seen: set[str] = set()
    unresolved: list[tuple[str, str]] = []
    for spec, where in candidates:
        if not spec or spec in seen:
            continue
        seen.add(spec)
        try:
            resolved, note = _model_spec(spec)
        except NotChecked as exc:
            notes.append(f"{exc} (from {where})")
            unresolved.append((spec, where))
            continue
        return resolved, where, notes + ([note] if note else []), {}
    logged = _logged_weights_gib(col)
    for spec, where in unresolved:
        standin = sized_standin(spec, logged_weights_gib=logged, tp=int(getattr(ctx, "tensor_parallel_size", 1) or 1),
                                launch_quantization=str(ctx.arg("quantization") or "") if hasattr(ctx, "arg") else "")
        if standin is None:
            continue
        return standin.model, f"{where}, as a sized stand-in", notes + [standin.note], standin.edits
    if notes:
        raise NotChecked("; ".join(notes))
    raise NotChecked("no model known (pass --model, or a log that names it)")


# --- a sized stand-in for a model the catalog does not hold ------------------------------------------------------
# Most models a report names are not in the bundled catalog (Qwen2.5-72B-Instruct-AWQ, Llama-3.3-70B-Instruct...),
# and without their config.json the planner cannot run. Their size is often stated all the same: the parameter count
# in the name, vLLM's "Model loading took X GiB" line, the quantization words. A catalog model of the same family,
# the same kind (dense or mixture of experts) and a parameter count within STANDIN_TOLERANCE of it then stands in,
# planned with the name's quantization: the checks are the stand-in's figures, an estimate, and always said so.
# A model with no stated size, or no such catalog model, stays unresolved (said on the fixes, never guessed).
STANDIN_TOLERANCE = 0.25  # the stand-in's parameter count within 25 % of the stated one (weights scale with it)
# Families whose members share the layout that sizes the KV cache and the weights (attention heads, GQA, MLP); the
# first one a name holds counts, so a distilled "DeepSeek-R1-Distill-Qwen-7B" is the Qwen it is built on.
_FAMILIES = ("qwen", "qwq", "llama", "mistral", "mixtral", "gemma", "deepseek", "phi", "glm", "gpt-oss", "granite",
             "nemotron", "minimax")
# The quantization a name states, as the --quantization value the planner reads (model/quantization.py).
_QUANT_WORDS = (("awq", "awq"), ("gptq", "gptq"), ("int4", "gptq"), ("w4a16", "gptq"), ("bnb", "bitsandbytes"),
                ("4bit", "bitsandbytes"), ("nvfp4", "nvfp4"), ("fp8", "fp8"))
# Words of a quantization the planner does not model by name: no stand-in then (its weights would be a guess).
_QUANT_UNMODELLED = ("int8", "w8a8", "w8a16", "8bit", "gguf", "exl2", "bpw", "mxfp4", "q4_", "q8_")


class Standin:
    def __init__(self, model: str, edits: dict[str, Any], note: str) -> None:
        self.model, self.edits, self.note = model, edits, note


def _family(name: str) -> tuple[str | None, float | None]:
    """The family word of a model name and the version number after it ("Meta-Llama-3.1-70B" -> ("llama", 3.1))."""
    import re

    low = name.lower()
    for fam in _FAMILIES:
        m = re.search(rf"(?<![a-z]){re.escape(fam)}(?:[-_ ]?(\d+(?:\.\d+)?))?", low)
        if m:
            return ("qwen" if fam == "qwq" else fam), (float(m.group(1)) if m.group(1) else None)
    return None, None


def _is_moe(name: str) -> bool:
    import re

    return bool(re.search(r"-A\d+(?:\.\d+)?B\b|\d+x\d+(?:\.\d+)?B|-\d+E\b|moe", name, re.IGNORECASE))


def _quant_of(name: str) -> str | None:
    """The --quantization a name states, "" when none, None when its words name one the planner does not model."""
    low = name.lower()
    if any(w in low for w in _QUANT_UNMODELLED):
        return None
    return next((q for w, q in _QUANT_WORDS if w in low), "")


def _logged_weights_gib(col: Any) -> float | None:
    fact = col.latest("weights") if col is not None and hasattr(col, "latest") else None
    return float(fact.value) if fact is not None and fact.value else None


def sized_standin(spec: str, *, logged_weights_gib: float | None = None, tp: int = 1,
                  launch_quantization: str = "") -> Standin | None:
    """A catalog model that stands in for ``spec`` (not readable offline) when the report states its size: the
    parameter count of its name, else vLLM's "Model loading took X GiB" (per GPU, times ``tp``, over the bytes per
    parameter its name implies). None when no size is stated, the family is unknown, the quantization words are not
    modelled, or no catalog model of that family and kind is within STANDIN_TOLERANCE."""
    import math

    from oomguard.diagnose.context import bytes_per_param_from_name, is_multimodal, params_from_name
    from oomguard.inputs.model_config import catalog_ids

    if any(c.isspace() for c in spec.strip()):
        return None  # words, not a model id or path ("Llama-3.1-8B + llama3-8b-accelerator"): not one model's size
    name = spec.strip().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    family, version = _family(name)
    quant = _quant_of(name)
    if family is None or quant is None:
        return None
    quant = quant or launch_quantization.lower()
    params, size_from = params_from_name(name), "its name"
    if params is None and logged_weights_gib:
        params = logged_weights_gib * max(1, tp) / bytes_per_param_from_name(name)
        size_from = f"vLLM's 'Model loading took {logged_weights_gib:.2f} GiB'" + (f" x TP {tp}" if tp > 1 else "")
    if not params:
        return None
    # a multimodal model profiles its encoder at start-up, a text one does not: the stand-in is of the same kind
    moe, multimodal = _is_moe(name), is_multimodal(name)
    best: tuple[tuple[float, ...], str, float] | None = None
    for cid in catalog_ids():
        cname = cid.rsplit("/", 1)[-1]
        cfam, cver = _family(cname)
        cparams, cquant = params_from_name(cname), _quant_of(cname)
        if cfam != family or not cparams or _is_moe(cname) != moe or is_multimodal(cname) != multimodal \
                or cquant is None:
            continue
        if abs(cparams - params) > STANDIN_TOLERANCE * params or (cquant and cquant != quant):
            continue
        key = (abs(math.log(cparams / params)), abs((cver or 0) - (version or 0)), float(cquant != quant))
        if best is None or key < best[0]:
            best = (key, cid, cparams)
    if best is None:
        return None
    _key, cid, cparams = best
    edits = {"quantization": quant} if quant and not _quant_of(cid.rsplit("/", 1)[-1]) else {}
    note = (f"model {spec!r} is not in the catalog: planned on the sized stand-in {cid} ({cparams:g}B) for its "
            f"{params:.3g}B (from {size_from}), same family ({family})"
            + (f", --quantization {quant} from the name" if edits else "")
            + "; an estimate: the checks are the stand-in's figures")
    return Standin(cid, edits, note)


def resolve_gpu(option: str | None, ctx: Any) -> tuple[str | None, float | None, bool, str, list[str]]:
    """(a GPU name or None, a total in GiB or None, whether the name is planned at that total, where they came
    from, notes) for ``make_checker``: ``--gpu``,
    else nvidia-smi's or torch's card, else the card the report's words name (the catalog must know it), else the
    total torch reports with no name. A named card whose catalog size is off torch's total by more than 5 % is
    planned at torch's total (a MIG slice, a card the words misname), and says so."""
    from oomguard.errors import OomguardError
    from oomguard.inputs.hardware import find_gpu_in_text, lookup_gpu

    total = ctx.gpu_total_gib
    notes: list[str] = []
    for name, where in ((option, "--gpu"), (ctx.gpu_name, "nvidia-smi or torch's message")):
        if name:
            return name, total, False, where, notes
    words = ctx.mentioned_gpu
    if words:
        card = find_gpu_in_text(words)
        if card is None:
            try:  # a bare "A100" is ambiguous: torch's total settles which card it is
                card = lookup_gpu(words, total) if total else None
            except (OomguardError, ValueError):
                card = None
        if card is None:
            notes.append(f"the GPU the report names ({words!r}, {ctx.mentioned_gpu_at}) is not one card of the "
                         "GPU table" + (" (its size is torch's total)" if total else ""))
        else:
            gib = card.total_bytes / (1 << 30)
            where = f"the report's words ({words!r}, {ctx.mentioned_gpu_at})"
            if ctx.mentioned_gpu_lines > 1:
                notes.append(f"{ctx.mentioned_gpu_lines} lines name a GPU; the first is taken ({card.name})")
            if total and abs(gib - total) > 0.05 * total:
                notes.append(f"{card.name} has {gib:.2f} GiB but torch reports {total:.2f} GiB: planned at torch's total")
                return card.name, total, True, where, notes
            return card.name, None, False, where, notes
    if total:
        notes.append(f"no card name in the report: a CUDA GPU of {total:.2f} GiB (torch's total) with the "
                     "capabilities of an Ampere card")
        return None, total, False, "torch's total capacity", notes
    raise NotChecked("no GPU known (pass --gpu, or a log with torch's OOM message or nvidia-smi)")


def check_diagnosis(diagnosis: Any, *, model: str | None = None, gpu: str | None = None,
                    num_gpus: int | None = None) -> bool:
    """Check every fix of ``diagnosis`` with the planner, the model and GPU taken from the options or the report
    (``resolve_model`` / ``resolve_gpu``); ``diagnosis.planner`` says what it planned on, or why it could not.

    Returns True when the planner ran. Co-resident memory (vLLM's "Free memory on device (F/T GiB) on
    startup" message) is charged to the plan, so a fix is one that starts next to the other process.
    """
    from oomguard.diagnose.events import Signal

    ctx, col = diagnosis.context, diagnosis.collector
    other = 0.0
    estimated = None
    for ev in col.signals:
        n = ev.numbers
        if ev.signal == Signal.STARTUP_FREE_MEMORY and n.get("free_gib") is not None and n.get("total_gib") \
                and not n.get("host"):
            other = max(other, n["total_gib"] - n["free_gib"])
        if ev.signal == Signal.KV_TOO_SMALL and n.get("estimated_max_len"):
            estimated = int(n["estimated_max_len"])
    notes: list[str] = []
    try:
        spec, model_from, notes, edits = resolve_model(model, ctx, col)
        gpu_name, gpu_gib, at_total, gpu_from, gpu_notes = resolve_gpu(gpu, ctx)
        checker = make_checker(model=spec, gpu=gpu_name, gpu_total_gib=gpu_gib,
                               num_gpus=num_gpus or ctx.num_gpus, args={**dict(ctx.args), **edits},
                               vllm_version=ctx.version,
                               other_gpu_gib=other, at_total=at_total)
        notes += gpu_notes + checker.notes
        from oomguard.diagnose.context import gpu_count_from_text

        checker.gpus_counted = bool(num_gpus or col.nvidia_smi or (gpu and gpu_count_from_text(gpu)))
    except NotChecked as exc:
        # Said on the fixes whether or not the user asked (--model / --gpu): a fix without a verdict reads as a
        # checked one otherwise (issue 17: "never silently"); the views say it once per failure.
        mark_not_checked(diagnosis.verdicts, str(exc))
        _said(diagnosis, {"checked": False, "why": str(exc)})
        return False
    _said(diagnosis, {"checked": True, "model": spec, "model_from": model_from, "stand_in": "stand-in" in model_from,
                      "gpu": checker.gpu.name,
                      "gpu_total_gib": round(checker.gpu.total_bytes / (1 << 30), 2), "gpu_from": gpu_from,
                      **({"notes": notes} if notes else {})})
    check_fixes(diagnosis.verdicts, checker, estimated_max_len=estimated)
    if "stand-in" in model_from:
        for v in diagnosis.verdicts:
            for f in v.fix:
                if f.checked and f.checked.startswith("fails: max-len-exceeds-model"):
                    # the stand-in's context window, not the model's: the stand-in cannot say
                    f.checked = (f"not checked: the sized stand-in {spec} has a shorter context window than this "
                                 "launch's max_model_len (the model's own window is not known offline)")
                elif f.checked and not f.checked.startswith("not checked"):
                    f.checked += f" (on the sized stand-in {spec}: an estimate)"
    return True


def _said(diagnosis: Any, planner: dict[str, Any]) -> None:
    if hasattr(diagnosis, "planner"):
        diagnosis.planner = planner
