"""Shared CLI plumbing: split oomguard's options from vLLM's, and build a plan context.

``plan``, ``check`` and ``fit`` accept vLLM's own flags mixed with ours
(``oomguard plan --gpu A100 --max-model-len 32768``). We split the argument
list ourselves: argparse would swallow a vLLM flag's value as our positional.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable

from oomguard.numbers import MAX_GPUS  # one bound for TP x PP x DP and --num-gpus
from oomguard.records import record
import oomguard.lazy_re as lazy_re

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any

# Exit codes: one table for every command (README "Commands"; each command's --help prints it).
EXIT_OK = 0  # ok: starts, fits, clean, passed, no alert
EXIT_FINDINGS = 1  # findings / will not start / does not fit / failed / alerts fired
EXIT_BAD_INPUT = 2  # bad input: one line naming the file, line and problem
EXIT_INCOMPLETE = 3  # could not complete: an unmodelled architecture, rules that could not run,
#                      a server unreachable or gone, a log that stops early, an export not verified
EXIT_PIPE = 141  # the reader closed the output pipe (`oomguard plan ... | head`): 128 + SIGPIPE, as `yes | head`
EXIT_MEANINGS = {
    EXIT_OK: "ok",
    EXIT_FINDINGS: "findings / will not start / does not fit / failed",
    EXIT_BAD_INPUT: "bad input",
    EXIT_INCOMPLETE: "could not complete",
    EXIT_PIPE: "the output pipe closed (e.g. | head)",
}


def exit_epilog(own: dict[int, str] | None = None) -> str:
    """The exit-code paragraph of a command's --help: the shared table, each code said the command's way."""
    parts = [f"{code} {(own or {}).get(code, meaning)}" for code, meaning in EXIT_MEANINGS.items()]
    return "exit codes (the same for every oomguard command): " + "; ".join(parts) + "."


# The largest GPU memory we accept anywhere (the biggest card today holds 288 GB, B300): past this a
# number is a typo or an attack on our arithmetic, not a GPU.
MAX_GPU_GIB = 4096.0


class OneLineParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage block), exit status 2, as every other bad input.
    Usage errors echo argument values ("unrecognized arguments: --api-key X"): they go through
    the redactor like every other error. Subparsers inherit the class."""

    def error(self, message: str):  # type: ignore[override]
        from oomguard.redact import redact_text, safe_terminal_text

        message = safe_terminal_text(redact_text(message))
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def _get_formatter(self):
        # argparse builds a formatter on every add_argument (to check the metavar), and a formatter
        # without a width asks shutil.get_terminal_size: importing shutil (bz2, lzma, fnmatch) was
        # ~5 ms of every command's start-up. The same width from the same sources, without shutil.
        return self.formatter_class(prog=self.prog, width=_terminal_columns() - 2)


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns (Python 3.10-3.13): $COLUMNS, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def number(*, integer: bool = False, minimum: float | None = None, maximum: float | None = None,
           above: float | None = None) -> Callable[[str], Any]:
    """An argparse ``type=`` for a finite number in range (``above``: strictly greater than)."""

    def convert(text: str) -> Any:
        from oomguard.numbers import NumberError, parse_float, parse_int

        raw = text.strip()
        try:
            value: Any = parse_int(raw) if integer else parse_float(raw)
        except NumberError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        if above is not None and not value > above:
            raise argparse.ArgumentTypeError(f"must be greater than {_fmt(above)}, got {raw}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {_fmt(minimum)}, got {raw}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {_fmt(maximum)}, got {raw}")
        return value

    convert.__name__ = "integer" if integer else "number"  # argparse names the type in its messages
    return convert


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# The option types every command shares.
GPU_GIB = number(above=0, maximum=MAX_GPU_GIB)
GIB_OR_ZERO = number(minimum=0, maximum=MAX_GPU_GIB)
HOST_GIB = number(above=0, maximum=1 << 20)  # 1 PiB of host RAM
GPU_COUNT = number(integer=True, minimum=1, maximum=MAX_GPUS)
COUNT = number(integer=True, minimum=1, maximum=1 << 40)
TOKENS = number(integer=True, minimum=1, maximum=1 << 40)


def host_gib_or_auto(text: str) -> str | float:
    """An argparse ``type=``: GiB of host RAM, or ``auto`` (read /proc/meminfo)."""
    if text.strip().lower() == "auto":
        return "auto"
    return HOST_GIB(text)


_K8S_QUANTITY = lazy_re.compile(r"(\d{1,15}(?:\.\d{1,9})?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")


def k8s_quantity(text: str) -> str:
    """An argparse ``type=``: a positive Kubernetes memory quantity (``16Gi``, ``512Mi``, ``8G``)."""
    raw = text.strip()
    m = _K8S_QUANTITY.fullmatch(raw)
    if not m or float(m.group(1)) <= 0:
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise argparse.ArgumentTypeError(f"{shown!r} is not a positive Kubernetes size (e.g. 16Gi, 512Mi)")
    return raw


def vllm_version(text: str) -> str:
    """An argparse ``type=``: a vLLM version oomguard has a table for (or can map to one)."""
    from oomguard.errors import InputError
    from oomguard.versions.releases import choose

    try:
        choose(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def split_argv(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], list[str]]:
    """(ours, vllm) — options our parser declares stay ours, the rest is vLLM's."""
    takes_value: dict[str, bool] = {}
    for action in parser._actions:  # noqa: SLF001  (argparse has no public API for this)
        for opt in action.option_strings:
            takes_value[opt] = action.nargs != 0
    ours: list[str] = []
    theirs: list[str] = []
    positional_taken = False
    i = 0
    while i < len(argv):
        tok = argv[i]
        name = tok.split("=", 1)[0]
        if name in takes_value:
            ours.append(tok)
            if takes_value[name] and "=" not in tok and i + 1 < len(argv):
                ours.append(argv[i + 1])
                i += 1
        elif tok.startswith("-") and len(tok) > 1:
            theirs.append(tok)
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if "=" not in tok and nxt is not None and not nxt.startswith("--") and not (not positional_taken and (os.path.isfile(nxt) or _is_stream(nxt))):
                # value of a vLLM flag (booleans are resolved later with the flag table)
                theirs.append(argv[i + 1])
                i += 1
        elif not positional_taken and (os.path.exists(tok) or _names_a_launch(tok)):
            ours.append(tok)
            positional_taken = True
        else:
            theirs.append(tok)
        i += 1
    return ours, theirs


_LAUNCH_SUFFIXES = (".sh", ".bash", ".yaml", ".yml", ".json", ".txt", ".env", ".cfg", ".conf")


def _is_stream(tok: str) -> bool:
    from oomguard.inputs.files import is_named_stream

    return is_named_stream(tok)


def _names_a_launch(tok: str) -> bool:
    """A word in our positional's place that is a launch even though no such file exists here: ``-``
    (stdin), ``/dev/fd/N`` (a pipe), ``PATH#NAME`` or a file name (then "no such file", not "unexpected argument")."""
    from oomguard.inputs.files import is_named_stream

    if tok == "-" or is_named_stream(tok):
        return True
    base = tok.split("#", 1)[0]
    if "#" in tok and os.path.exists(base):
        return True
    return base.lower().endswith(_LAUNCH_SUFFIXES) and not tok.startswith("-")


def add_target_options(p: argparse.ArgumentParser, *, positional: bool = True) -> None:
    if positional:
        p.add_argument("launch_file", nargs="?", metavar="LAUNCH_FILE", help="start_api.sh or a vLLM --config YAML")
    p.add_argument("--model", dest="og_model", metavar="PATH|HF_ID", help="config.json, model dir, HF id (cache, catalog or Hub)")
    p.add_argument("--gpu", metavar="NAME", help="GPU name, e.g. A100-80GB, H100, RTX-4090")
    p.add_argument("--gpu-memory-gib", type=GPU_GIB, metavar="X", help="total GPU memory in GiB as your log prints it")
    p.add_argument("--num-gpus", type=GPU_COUNT, metavar="N", help="GPUs available to the launch (default: TP × PP)")
    p.add_argument("--vllm-version", type=vllm_version, metavar="V", help="vLLM release to model (default: newest supported)")
    p.add_argument("--other-gpu-use-gib", type=GIB_OR_ZERO, default=0.0, metavar="X", help="GPU memory held by other processes")
    p.add_argument("--usage", choices=["serve", "llm"], default="serve", help="vllm serve (default) or the LLM class")
    p.add_argument("--engine-python", metavar="PATH", help="python of an installed vLLM: ask it for its exact resolved defaults")
    p.add_argument("--lenient", action="store_true", help="skip flags this vLLM version does not know (reported as notes) instead of failing")
    add_calibration_option(p)


def add_calibration_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", metavar="PROFILE.yaml",
                   help="offsets measured by `oomguard calibrate --write` on your own logs (default: $OOMGUARD_CALIBRATION); "
                        "each adjusted term says so, with its uncalibrated figure")


def calibration_of(args: argparse.Namespace):
    """The calibration profile of ``--calibration`` or ``$OOMGUARD_CALIBRATION`` (None when neither)."""
    import os

    if not getattr(args, "calibration", None) and not os.environ.get("OOMGUARD_CALIBRATION"):
        return None  # start-up: the profile reader (and model.calibration) load only when one is named
    from oomguard.calibrate.profile import from_option

    return from_option(getattr(args, "calibration", None))


@record
class Context:
    """What every launch command works on: the launch read once, its model, GPU and vLLM release."""
    launch: Any
    model: Any
    gpu: Any
    version: str | None
    num_gpus: int | None
    other_gpu_use_bytes: int
    usage: str
    calibration: Any = None  # model.calibration.Calibration from --calibration / $OOMGUARD_CALIBRATION

    def plan(self, flags: dict | None = None, env: dict | None = None):
        from oomguard.model.planner import plan_launch

        return plan_launch(
            self.model,
            self.gpu,
            self.launch.flags if flags is None else flags,
            self.launch.env if env is None else env,
            version=self.version,
            num_gpus=self.num_gpus,
            other_gpu_use_bytes=self.other_gpu_use_bytes,
            usage=self.usage,
            calibration=self.calibration,
        )


def read_targets(args: argparse.Namespace, vllm_args: list[str]) -> list:
    """Every launch of the target: a file (``-`` and ``/dev/fd/N`` too; Helm values give one per
    modelSpec), a command after ``--``, or flags given directly. One reader for every command
    (oomguard.inputs.reader)."""
    from oomguard.errors import InputError
    from oomguard.inputs.reader import read_command, read_flags, read_launches

    version = getattr(args, "vllm_version", None)
    lenient = bool(getattr(args, "lenient", False))
    launch_file = getattr(args, "launch_file", None)
    tail = getattr(args, "launch_tail", []) or []
    if launch_file:
        launches = read_launches(launch_file, version=version, lenient=lenient)
        for launch in launches:
            if vllm_args:
                extra = read_flags(vllm_args, version=version or launch.version, lenient=lenient)
                launch.flags.update(extra.flags)
                launch.sites.update(extra.sites)
                launch.problems.extend(extra.problems)
                launch.unresolved.extend(extra.unresolved)
    elif tail:
        launches = [read_command(tail, version=version, lenient=lenient)]
    else:
        launches = [read_flags(vllm_args, version=version, lenient=lenient)]
    for launch in launches:
        _carry_removed_flags(launch)
    if launches[0].kind == "flags" and not vllm_args and not getattr(args, "og_model", None):
        raise InputError("nothing to plan: give a launch file, a command after --, or --model with vLLM flags")
    return launches


def read_target(args: argparse.Namespace, vllm_args: list[str]):
    """The one launch of the target (``FILE#NAME`` picks one of a file holding several)."""
    from oomguard.errors import InputError
    from oomguard.inputs.files import display
    from oomguard.inputs.reader import short_name

    launches = read_targets(args, vllm_args)
    if len(launches) > 1:
        path = getattr(args, "launch_file", "") or ""
        names = ", ".join(x.name or "?" for x in launches)
        first = short_name(launches[0]) or "NAME"
        raise InputError(f"{len(launches)} vLLM launches here ({names}): name one as {path}#{first}", file=display(path))
    return launches[0]


def build_contexts(args: argparse.Namespace, vllm_args: list[str], *, need_gpu: bool = True) -> list[Context]:
    """A plan context per launch of the target (several for Helm values with several modelSpecs)."""
    return [context_for(args, launch, need_gpu=need_gpu) for launch in read_targets(args, vllm_args)]


def build_context(args: argparse.Namespace, vllm_args: list[str], *, need_gpu: bool = True) -> Context:
    return context_for(args, read_target(args, vllm_args), need_gpu=need_gpu)


def context_for(args: argparse.Namespace, launch, *, need_gpu: bool = True) -> Context:
    from oomguard.errors import InputError
    from oomguard.inputs.hardware import lookup_gpu
    from oomguard.inputs.model_config import load_model
    from oomguard.units import GiB

    model_spec = getattr(args, "og_model", None) or launch.model
    if not model_spec:
        raise InputError("no model: name it in the launch (vllm serve MODEL) or pass --model")
    model = load_model(model_spec)
    gpu = None
    if need_gpu or args.gpu or args.gpu_memory_gib:
        gpu = lookup_gpu(args.gpu, args.gpu_memory_gib)
    if args.other_gpu_use_gib < 0:
        raise InputError("--other-gpu-use-gib must not be negative")
    version = args.vllm_version or launch.version  # the user's, else the image tag's
    if getattr(args, "engine_python", None):
        from oomguard.inputs.engine_python import merge_engine_defaults, query_engine

        cfg = _config_path_of(model)
        resolved = query_engine(args.engine_python, cfg, launch.flags, usage=args.usage)
        launch.flags, engine_version = merge_engine_defaults(launch.flags, resolved)
        version = version or engine_version.split("+")[0] or None
        launch.notes.append(f"defaults resolved by vLLM {engine_version} ({resolved.get('platform')}) via --engine-python")
    num_gpus = args.num_gpus if args.num_gpus is not None else launch.manifest_gpus()
    return Context(launch, model, gpu, version, num_gpus, int(args.other_gpu_use_gib * GiB), args.usage, calibration_of(args))


def _config_path_of(model):
    from pathlib import Path

    from oomguard.errors import InputError
    from oomguard.inputs import files

    if not model.config_path or not files.is_file(model.config_path):
        raise InputError(f"--engine-python needs a local config.json for {model.name}")
    return Path(model.config_path)


def _carry_removed_flags(launch) -> None:
    """Honour removed flags whose meaning survives elsewhere (lenient mode only)."""
    from oomguard.errors import InputError
    from oomguard.inputs.jsonflags import check_fields
    from oomguard.numbers import json_loads

    for opt, value, file, line in getattr(launch, "unknown", []):
        if opt.replace("_", "-") == "--rope-scaling" and value:
            try:
                rope = json_loads(value)
            except ValueError:
                continue
            if isinstance(rope, dict):  # checked like config.json: NaN, 1e308 factors are bad input
                try:
                    check_fields("rope_scaling", rope, option=opt)
                except InputError as exc:
                    raise InputError(exc.message, file=file, line=line) from None
            if isinstance(rope, dict):
                over = dict(launch.flags.get("hf_overrides") or {})
                over.setdefault("rope_scaling", rope)
                launch.flags["hf_overrides"] = over
                launch.notes.append("--rope-scaling applied as --hf-overrides '{\"rope_scaling\": ...}' for the plan")


def rope_scaling_flags(text: str | None) -> dict | None:
    """fit's ``--rope-scaling JSON`` as the flags every candidate carries (``--hf-overrides``), checked
    like a config.json's rope_scaling (NaN, 1e308 or a negative factor is bad input); None without it."""
    if not text:
        return None
    from oomguard.errors import InputError
    from oomguard.inputs.jsonflags import check_fields
    from oomguard.inputs.structured import load_json
    from oomguard.numbers import nonfinite_at

    rope = load_json(text, file="--rope-scaling")
    if not isinstance(rope, dict) or "factor" not in rope:
        raise InputError("--rope-scaling: expected a JSON object with rope_type and factor (as vLLM's --hf-overrides rope_scaling)")
    bad = nonfinite_at(rope)
    if bad is not None:
        raise InputError(f"--rope-scaling: {bad[0]} is {bad[1]!r}, not a finite number")
    check_fields("rope_scaling", rope, option="--rope-scaling")
    return {"hf_overrides": {"rope_scaling": rope}}


def check_model_option(spec: str | None, hint: str = "") -> None:
    """``--model`` names a model config in every command: an unknown one is bad input (with the
    did-you-mean of ``load_model``), never silently ignored where the command would not use it."""
    if not spec:
        return
    from oomguard.errors import InputError, UnsupportedModelError
    from oomguard.inputs.model_config import load_model

    try:
        load_model(spec)
    except UnsupportedModelError:
        return  # a real config oomguard cannot model: the command says so where it plans
    except InputError as exc:
        raise InputError(f"--model: {exc}{hint}") from None


def token_count(text: str | None, option: str) -> int | None:
    """A token count as users write it (131072, 128K, 1M) for --context and its kin."""
    from oomguard.errors import InputError
    from oomguard.units import parse_size

    if text is None:
        return None
    try:
        n = parse_size(text)  # a plain count too; length-capped (oomguard.numbers)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a token count (e.g. 131072, 128K, 1M, 750k)") from None
    if n <= 0:
        raise InputError(f"{option} must be positive, got {text}")
    return n
