"""Everything a check rule may look at, built once per launch.

``build_check_context`` takes the launch as the one reader gives it in lenient mode
(``oomguard.inputs.reader``: every flag problem recorded, not raised), finds the
model and the GPU the way ``plan`` does, reads the optional evidence
(``nvidia-smi`` output, ``nvidia-smi topo -m``, host RAM) and exposes the memory
plan. Rules never do I/O: they ask the context, and re-plan with edited flags
through ``plan_with`` (plans are pure and cheap).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from oomguard.check.finding import Edit, Finding
from oomguard.inputs.launch import FlagProblem, Launch, ProblemKind
from oomguard.check.needs import Needs
from oomguard.errors import InputError, OomguardError
from oomguard.records import field, record
from oomguard.units import GiB

TYPE_CHECKING = False  # typing's own constant without importing typing (start-up: oomguard/records.py)
if TYPE_CHECKING:
    from typing import Any


@record
class CheckOptions:
    """What the user told ``check`` beyond the launch itself."""

    version: str | None = None
    model: str | None = None
    gpu: str | None = None
    gpu_memory_gib: float | None = None
    num_gpus: int | None = None
    other_gpu_use_gib: float | None = None
    usage: str = "serve"
    host_ram_gib: str | float | None = None  # a number, or "auto" (/proc/meminfo)
    avg_input_len: int | None = None
    avg_output_len: int | None = None
    concurrency: int | None = None
    nvidia_smi: str | None = None  # path
    topo: str | None = None  # path
    meminfo_path: str = "/proc/meminfo"
    calibration: Any = None  # model.calibration.Calibration (--calibration / $OOMGUARD_CALIBRATION)


@record
class CheckContext:
    launch: Launch
    options: CheckOptions
    model: Any = None
    gpu: Any = None
    release: Any = None
    version_tuple: tuple[int, int, int] = (0, 0, 0)
    num_gpus: int | None = None  # GPUs the launch may use (None: TP × PP)
    visible_gpus: list[int] | None = None  # from CUDA_VISIBLE_DEVICES, when set
    other_gpu_use_bytes: int = 0
    other_gpu_use_source: str = ""
    host_ram_bytes: int | None = None
    host_ram_source: str = ""
    topology: Any = None
    smi: Any = None
    notes: list[str] = field(default_factory=list)
    model_note: str = ""
    model_unsupported: bool = False  # the config was read but its architecture is not modelled
    unmodelled_config: dict = field(default_factory=dict)  # that config, for the rules that need only its fields
    gpu_note: str = ""
    plan_error: str | None = None
    rules: list = field(default_factory=list)  # every registered rule (set by registry.run_rules)
    _plan: Any = None
    _plans: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ basics
    @property
    def flags(self) -> dict:
        return self.launch.flags

    @property
    def env(self) -> dict:
        return self.launch.env

    @property
    def version_label(self) -> str:
        return ".".join(map(str, self.version_tuple))

    def is_set(self, dest: str) -> bool:
        return dest in self.launch.flags

    def missing(self, needs: Iterable[Needs]) -> str:
        """Why a rule with these needs cannot run ("" when it can)."""
        for n in needs:
            if n in (Needs.MODEL, Needs.PLAN) and self.model is None:
                return self.model_note or "no model config"
            if n in (Needs.GPU, Needs.PLAN) and self.gpu is None:
                return self.gpu_note or "no GPU given (--gpu)"
            if n is Needs.PLAN and self.plan is None:
                return f"the launch could not be planned: {self.plan_error}"
            if n is Needs.TOPOLOGY and self.topology is None:
                return "no topology given (--topo FILE with `nvidia-smi topo -m` output)"
        return ""

    # ------------------------------------------------------------- spellings
    def option_for(self, dest: str) -> str:
        """How this release spells the flag with this dest (env var names pass through)."""
        if not dest or dest.isupper() or dest.startswith("-"):
            return dest
        if self.release is not None:
            try:
                return self.release.flag(dest).name
            except KeyError:
                pass
        return "--" + dest.replace("_", "-")

    def has_flag(self, dest: str) -> bool:
        if self.release is None:
            return True
        try:
            self.release.flag(dest)
            return True
        except KeyError:
            return False

    def edit(self, dest: str, value: Any) -> Edit:
        """A fix that sets (or, with None, removes) the flag with this dest."""
        if dest.isupper():
            return Edit(dest, value, dest=dest)
        return Edit(self.option_for(dest), value, dest=dest)

    def location_of(self, dests: Iterable[str]) -> tuple[str | None, int | None]:
        """Where the first of these flags is written (a flag this release no longer knows,
        such as --rope-scaling, is found among the parse problems); else the command."""
        launch = self.launch
        dests = list(dests)
        for d in dests:
            site = launch.sites.get(d)
            if site is not None:
                return site.file, site.line
        for d in dests:
            for p in launch.problems:
                if p.option.lstrip("-").replace("-", "_") == d or p.dest == d:
                    return p.file, p.line
        return launch.path, launch.command_line

    def inline_ignored(self, f: Finding) -> bool:
        r = self.launch
        keys = {f.rule.upper(), f.name.upper()}
        if keys & r.ignore_file:
            return True
        if f.line is not None and f.file in (None, r.path):
            return bool(keys & r.ignore_lines.get(f.line, set()))
        return False

    # ------------------------------------------------------------------ plans
    @property
    def plan(self):
        if self._plan is None and self.model is not None and self.gpu is not None and self.plan_error is None:
            try:
                self._plan = self.plan_with(self.flags, self.env)
            except OomguardError as exc:
                self.plan_error = str(exc)
        return self._plan

    def model_for(self, flags: dict):
        """The model as vLLM will see it after --hf-overrides / --rope-scaling (the planner's one
        function, ``model.overrides.apply_overrides``); a --rope-scaling this release no longer
        knows still tells the plan what the launch meant."""
        from oomguard.model.engine import parse_version
        from oomguard.model.overrides import apply_overrides

        rope = rope_override(flags, self.launch)
        if rope is not None and flags.get("hf_overrides") is None and flags.get("rope_scaling") is None:
            flags = {**flags, "rope_scaling": rope}
        return apply_overrides(self.model, flags, parse_version(self.version_label))

    def plan_with(self, flags: dict, env: dict | None = None):
        """The plan of the launch with these flags (cached by value; plans are pure)."""
        from oomguard.model.planner import plan_launch

        env = self.env if env is None else env
        key = (_freeze(flags), _freeze(env))
        hit = self._plans.get(key)
        if hit is None:
            hit = plan_launch(
                self.model_for(flags),
                self.gpu,
                flags,
                env,
                version=self.version_label,
                num_gpus=self.num_gpus,
                other_gpu_use_bytes=self.other_gpu_use_bytes,
                usage=self.options.usage,
                calibration=self.options.calibration,
            )
            self._plans[key] = hit
        return hit

    def edited(self, edits: Iterable[Edit]) -> tuple[dict, dict]:
        """The launch's flags and environment after ``edits``."""
        flags = dict(self.flags)
        env = dict(self.env)
        for e in edits:
            if e.is_env:
                if e.value is None:
                    env.pop(e.flag, None)
                else:
                    env[e.flag] = str(e.value)
                continue
            if e.dest is None:
                continue
            if e.value is None:
                flags.pop(e.dest, None)
            else:
                flags[e.dest] = e.value
        return flags, env

    def replan(self, edits: Iterable[Edit]):
        flags, env = self.edited(edits)
        return self.plan_with(flags, env)


def _freeze(d: dict) -> tuple:
    import json

    return tuple(sorted((k, json.dumps(v, sort_keys=True, default=str)) for k, v in d.items()))


# ---------------------------------------------------------------------------
# helpers shared by rules


def json_value(value: Any) -> Any:
    """A JSON flag's value as data (some flags, like --hf-overrides, are typed as strings)."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        from oomguard.numbers import json_loads

        try:  # NaN, 1e999 and 5000-digit numbers are refused (the flag's own finding says so)
            return json_loads(value)
        except ValueError:
            return value
    return value


def rope_override(flags: dict, launch: Launch | None = None) -> dict | None:
    """RoPE scaling the launch applies on top of the config (--hf-overrides, --rope-scaling,
    or a --rope-scaling this release no longer knows, read from its JSON value)."""
    hf = json_value(flags.get("hf_overrides"))
    if isinstance(hf, dict):
        for key in ("rope_scaling", "rope_parameters"):
            if isinstance(hf.get(key), dict):
                return hf[key]
        tc = hf.get("text_config")
        if isinstance(tc, dict) and isinstance(tc.get("rope_scaling"), dict):
            return tc["rope_scaling"]
    rs = json_value(flags.get("rope_scaling"))
    if isinstance(rs, dict):
        return rs
    if launch is not None:
        for p in launch.problems:
            if p.option.lstrip("-").replace("_", "-") == "rope-scaling" and p.value_word is not None:
                from oomguard.errors import InputError
                from oomguard.inputs.jsonflags import check_fields
                from oomguard.numbers import json_loads

                try:  # a flag this release lost: its JSON is still read safely and checked like config.json
                    val = json_loads(p.value_word.text)
                    if isinstance(val, dict):
                        check_fields("rope_scaling", val, option="--rope-scaling")
                except (ValueError, InputError):
                    return None
                return val if isinstance(val, dict) else None
    return None


def model_by_name(launch, spec: str):
    """The model a launch means when its path is not on this machine: the path's last two
    components as an HF id (``/models/Qwen/Qwen3-8B``), its last component as a catalog name, or
    ``--served-model-name``, each looked up locally only (HF cache, catalog). (model, how) or (None, "")."""
    from oomguard.inputs.model_config import load_model
    from oomguard.errors import UnsupportedModelError

    parts = [p for p in str(spec).replace("\\", "/").split("/") if p and not p.startswith("$")]
    tries = []
    if len(parts) >= 2:
        tries.append(("/".join(parts[-2:]), "the path's last two components"))
    if parts:
        tries.append((parts[-1], "the path's last component"))
    served = (launch.flags or {}).get("served_model_name")
    if isinstance(served, list):
        served = served[0] if served else None
    if served:
        tries.append((str(served), "--served-model-name"))
    for name, how in tries:
        try:
            m = load_model(name, allow_hub=False)
            return m, f"{how} ({name})"
        except UnsupportedModelError:
            return None, ""
        except OomguardError:
            continue
    return None, ""


def read_host_ram(path: str = "/proc/meminfo") -> tuple[int | None, str]:
    """Host RAM a new server can use (``--host-ram-gib auto`` in check and fit): host's parser."""
    from oomguard.host.procfs import read_available_ram

    return read_available_ram(path)


def _read_evidence_text(path: str, what: str) -> str:
    from oomguard.inputs import files

    raw = files.read_bytes(path, limit=files.CAPTURE_BYTES, what=what)
    if b"\x00" in raw[:4096]:
        raise InputError(f"binary file, expected {what}", file=path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"not UTF-8 text, expected {what}", file=path) from None


def _evidence_lines(path: str, what: str):
    """``(line_no, line)`` of an evidence file, streamed (a 64 MB ``nvidia-smi -l`` series is not held as
    text, nor as a list of lines), with ``_read_evidence_text``'s refusals: over the capture cap, binary,
    not UTF-8. Returns (the first 64 KiB as text, for the form, and the lines)."""
    from oomguard.inputs import files, logs

    if path == "-":
        raise InputError(f"{what}: cannot read this input from stdin", file="-")
    stream = files.open_stream(path, what=what, limit=files.CAPTURE_BYTES, gunzip=False)
    head = logs.sniff(stream)
    if b"\x00" in head[:4096]:
        stream.close()
        raise InputError(f"binary file, expected {what}", file=path)

    def lines():
        notes = logs.ReadNotes()
        try:
            for block in logs.iter_blocks(stream, notes):
                try:
                    text = block.text.decode("utf-8")
                except UnicodeDecodeError:
                    if not block.long_line_piece:
                        raise InputError(f"not UTF-8 text, expected {what}", file=path) from None
                    text = block.text.decode("utf-8", errors="replace")  # a piece of a huge line: cut anywhere
                yield from enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"),
                                     start=block.first_line)
        finally:
            stream.close()

    return head.decode("utf-8", errors="replace"), lines()


def _nvidia_smi_evidence(path: str, what: str):
    from oomguard.inputs.nvidia_smi import parse_nvidia_smi

    head, lines = _evidence_lines(path, what)
    return parse_nvidia_smi(lines, sample=head)


def _evidence(path: str, what: str, parse, *, streamed: bool = False):
    """A parsed evidence file (``--nvidia-smi``, ``--topo``), read once per command: check builds its
    context again for each fix it tries (a 31 MB ``nvidia-smi -l`` series was parsed three times,
    40 s). Keyed by the file's identity and size, so a file rewritten in between is read again."""
    import os

    from oomguard.inputs import files

    st = files.stat_path(path, what)
    key = (what, os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    kept = _EVIDENCE.get(what)
    if kept is None or kept[0] != key:
        kept = _EVIDENCE[what] = (key, parse(path, what) if streamed else parse(_read_evidence_text(path, what)))
    return kept[1]


_EVIDENCE: dict[str, tuple] = {}  # the last file of each kind: one command reads one of each


def build_check_context(launch: Launch, options: CheckOptions) -> CheckContext:
    """Resolve the release, model, GPU and evidence for a launch already read (the release the
    launch was read with: --vllm-version, else its image tag, else the newest table)."""
    from oomguard.model.engine import parse_version

    ctx = CheckContext(launch, options)
    from oomguard.versions import get_release

    version = options.version or launch.version
    ctx.release = get_release(version)
    ctx.version_tuple = parse_version(ctx.release.version if version is None else version)
    if getattr(ctx.release, "note", ""):
        ctx.notes.append(ctx.release.note)

    # --- evidence files first: nvidia-smi can name the GPU
    if options.nvidia_smi:
        ctx.smi = _evidence(options.nvidia_smi, "nvidia-smi output", _nvidia_smi_evidence, streamed=True)
        if not ctx.smi.gpus:
            raise InputError("no GPU rows found in the nvidia-smi output", file=options.nvidia_smi)
    if options.topo:
        from oomguard.inputs.topology import parse_topology

        ctx.topology = _evidence(options.topo, "`nvidia-smi topo -m` output",
                                 lambda text: parse_topology(text, source=options.topo))

    env = launch.env
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and re.fullmatch(r"\s*\d+(\s*,\s*\d+)*\s*", cvd or ""):
        ctx.visible_gpus = [int(x) for x in cvd.split(",")]
    ctx.num_gpus = options.num_gpus if options.num_gpus is not None else launch.manifest_gpus()
    if ctx.num_gpus is None and ctx.visible_gpus is not None:
        ctx.num_gpus = len(ctx.visible_gpus)
    if ctx.num_gpus is None and ctx.smi is not None:
        ctx.num_gpus = len(ctx.smi.gpus)
    if ctx.num_gpus is None and ctx.topology is not None:
        ctx.num_gpus = len(ctx.topology.gpus)

    # --- model
    spec = options.model or launch.model
    if not spec:
        ctx.model_note = "no model: name it in the launch or pass --model"
    else:
        from oomguard.inputs.model_config import load_model

        from oomguard.errors import UnsupportedModelError

        try:
            ctx.model = load_model(spec)
            gate = ctx.model.served_until
            if gate is not None and ctx.version_tuple > gate[0]:
                # an architecture vLLM served only up to a release: vLLM's own refusal at this one
                ctx.model = None
                raise UnsupportedModelError(f"{spec}: vLLM {ctx.version_label}: {gate[1]}")
        except UnsupportedModelError as exc:
            # read, but not modelled: every rule that needs no memory plan still runs
            ctx.model_unsupported = True
            ctx.model_note = f"the memory rules need the architecture, which oomguard does not model ({exc})"
            ctx.unmodelled_config = _raw_config(spec)
        except OomguardError as exc:
            if options.model:
                raise  # the user named it explicitly: bad input
            ctx.model, how = model_by_name(launch, spec)
            if ctx.model is None:
                ctx.model_note = f"model config not found ({exc})"
            else:
                ctx.notes.append(f"{spec} is not on this machine: using the config of {ctx.model.source}, matched by {how}; pass --model PATH to use another")

    # --- GPU
    from oomguard.inputs.hardware import lookup_gpu

    if options.gpu or options.gpu_memory_gib:
        ctx.gpu = lookup_gpu(options.gpu, options.gpu_memory_gib)
    elif ctx.smi is not None:
        series = next(iter(ctx.smi.gpus.values()))
        try:
            ctx.gpu = lookup_gpu(series.name or "", None)
        except OomguardError:
            if series.memory_total_bytes:
                ctx.gpu = lookup_gpu(None, series.memory_total_bytes / GiB)
        if ctx.gpu is not None:
            ctx.notes.append(f"GPU taken from the nvidia-smi output: {ctx.gpu.name}")
    if ctx.gpu is None:
        ctx.gpu_note = "no GPU given: pass --gpu NAME (or --gpu-memory-gib X, or --nvidia-smi FILE) to run the memory rules"

    # --- memory held by others
    if options.other_gpu_use_gib is not None:
        if options.other_gpu_use_gib < 0:
            raise InputError("--other-gpu-use-gib must not be negative")
        ctx.other_gpu_use_bytes = int(options.other_gpu_use_gib * GiB)
        ctx.other_gpu_use_source = "--other-gpu-use-gib"
    elif ctx.smi is not None:
        ctx.other_gpu_use_bytes, ctx.other_gpu_use_source = _other_use_from_smi(ctx)

    # --- host RAM
    h = options.host_ram_gib
    if h is not None:
        if str(h).lower() == "auto":
            ctx.host_ram_bytes, ctx.host_ram_source = read_host_ram(options.meminfo_path)
        else:
            try:
                gib = float(h)
            except ValueError:
                raise InputError(f"--host-ram-gib expects a number of GiB or 'auto', got {h!r}") from None
            if gib <= 0:
                raise InputError("--host-ram-gib must be positive")
            ctx.host_ram_bytes, ctx.host_ram_source = int(gib * GiB), "--host-ram-gib"
    for name in ("avg_input_len", "avg_output_len", "concurrency"):
        v = getattr(options, name)
        if v is not None and v <= 0:
            raise InputError(f"--{name.replace('_', '-')} must be positive")
    _validate_ranges(ctx)
    if options.calibration is not None and ctx.model is not None and ctx.gpu is not None:
        from oomguard.model.calibration import group_key

        ctx.notes += options.calibration.lookup(group_key(ctx.gpu, ctx.version_tuple, ctx.model))[1]
    return ctx


# (dest, test, message) for values argparse accepts but vLLM's config classes reject
def _range_checks(v: tuple[int, int, int]):
    return (
        ("max_model_len", lambda x: isinstance(x, int) and (x > 0 or x == -1) or x == "auto",
         "must be a positive integer (or -1/auto)" if v >= (0, 27, 0) else None),
        ("gpu_memory_utilization", lambda x: isinstance(x, (int, float)) and 0 < x <= 1, "must be in (0, 1]"),
        ("tensor_parallel_size", lambda x: isinstance(x, int) and x >= 1, "must be at least 1"),
        ("pipeline_parallel_size", lambda x: isinstance(x, int) and x >= 1, "must be at least 1"),
        ("data_parallel_size", lambda x: isinstance(x, int) and x >= 1, "must be at least 1"),
        ("max_num_seqs", lambda x: isinstance(x, int) and x >= 1, "must be at least 1"),
        ("max_num_batched_tokens", lambda x: isinstance(x, int) and x >= 1, "must be at least 1"),
        ("kv_cache_memory_bytes", lambda x: isinstance(x, int) and x > 0, "must be a positive number of bytes"),
    )


def invalid_values(flags: dict, version_tuple: tuple[int, int, int]) -> list[tuple[str, object, str]]:
    """``(dest, value, why)`` for each flag value vLLM's config classes reject (the table check uses;
    ``oomguard export`` refuses such a launch with it)."""
    return [(dest, flags[dest], why) for dest, ok, why in _range_checks(version_tuple)
            if why is not None and dest in flags and not ok(flags[dest])]


def _validate_ranges(ctx: CheckContext) -> None:
    """Move values vLLM would reject out of the flags (into problems), so that the
    plan and the memory rules see vLLM's default instead of nonsense."""
    launch = ctx.launch
    for dest, ok, why in _range_checks(ctx.version_tuple):
        if dest not in launch.flags:
            continue
        value = launch.flags[dest]
        if ok(value):
            continue
        site = launch.sites.get(dest)
        if why is None:  # older releases read max_model_len 0 as "derive it"
            launch.flags.pop(dest)
            ctx.notes.append(f"--max-model-len {value}: vLLM {ctx.version_label} derives the length from the model")
            continue
        opt = site.option if site else ctx.option_for(dest)
        launch.problems.append(
            FlagProblem(
                ProblemKind.INVALID_VALUE,
                site.yaml_key if site and site.yaml_key else opt,
                f"{opt} {value}: {why}",
                site.file if site else launch.path,
                site.line if site else launch.command_line,
                option_word=site.option_word if site else None,
                value_word=site.value_word if site else None,
                yaml_key=site.yaml_key if site else None,
                dest=dest,
            )
        )
        launch.flags.pop(dest)


def _other_use_from_smi(ctx: CheckContext) -> tuple[int, str]:
    """Memory already used on the launch's GPUs in the nvidia-smi snapshot (before vLLM starts)."""
    smi = ctx.smi
    world = int(ctx.flags.get("tensor_parallel_size") or 1) * int(ctx.flags.get("pipeline_parallel_size") or 1)
    indices = ctx.visible_gpus or sorted(i for i in smi.gpus if i is not None)[:world] or list(smi.gpus)
    worst, worst_idx = 0, None
    for idx in indices:
        series = smi.gpus.get(idx)
        if series is None or series.last is None or series.last.memory_used_bytes is None:
            continue
        used = series.last.memory_used_bytes
        # a vLLM already running there is the launch itself, not another tenant
        used -= sum(p.used_memory_bytes or 0 for p in smi.processes if p.gpu_index == idx and "vllm" in p.name.lower())
        if used > worst:
            worst, worst_idx = used, idx
    if worst_idx is None:
        return 0, ""
    return worst, f"nvidia-smi: GPU{worst_idx} has {worst / GiB:.2f} GiB in use"


def _raw_config(spec: str) -> dict:
    """The config.json of a model oomguard reads but does not model ({} when it cannot tell)."""
    from pathlib import Path

    from oomguard.inputs import model_config as mc

    for find in (lambda s: Path(s) if Path(s).is_dir() else None, mc._catalog_dir, mc._hf_cache_dir):
        try:
            d = find(spec)
            if d is None:
                continue
            cfg = mc.read_json(mc._config_file_in(d))
        except (OomguardError, OSError, ValueError):
            continue
        return cfg if isinstance(cfg, dict) else {}
    return {}
