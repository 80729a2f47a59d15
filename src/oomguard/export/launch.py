"""Freeze a verified launch into the service definition that will run it.

One ``Launch`` (model, typed flags, environment) becomes a systemd unit, a
``docker run`` line, a compose service, a Kubernetes Deployment, an env file
or a vLLM ``--config`` YAML, with the same flags so that a restart cannot
bring back the old ones. Each target renders through its own grammar, word by
word or as a data structure, never by pasting text: systemd's quoting and
specifier rules (``systemd.py``), shell quoting (``shell.py``) for the docker
line and env files, PyYAML's safe emitter (``yamlout.py``) for compose,
Kubernetes and ``--config``. What a value may hold is decided in
``fields.py``; what is secret, in ``secrets.py`` (the one redactor).

Every renderer also returns the structure it meant to write (the unit's
settings, the shell words, the YAML documents, the env lines);
``readback.check_structure`` parses the text with the target's own grammar and
compares, so a value that became structure is caught before anything is printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from oomguard.textenum import TextEnum
from oomguard.errors import InputError
from oomguard.export.fields import CONTROL, check_env_name, refuse_control, refuse_nul, visible
from oomguard.export.secrets import SecretPlan, plan_for
from oomguard.export.shell import EnvRef, ShellQuoteError, Word
from oomguard.inputs.render import flag_form, flags_to_argv

DEFAULT_IMAGE = "vllm/vllm-openai"
DEFAULT_PORT = 8000
DEFAULT_SHM = "16Gi"


class Target(TextEnum):
    SYSTEMD = "systemd"
    DOCKER = "docker"
    COMPOSE = "compose"
    KUBERNETES = "kubernetes"
    ENV = "env"
    YAML = "yaml"


@dataclass(frozen=True)
class ExportOptions:
    vllm_version: str | None = None  # for flag spellings and the image tag
    name: str = "vllm"
    image: str | None = None  # default vllm/vllm-openai:v<version> (or :latest)
    vllm_bin: str = "/usr/local/bin/vllm"  # systemd's ExecStart needs a path
    shm_size: str | None = None  # Kubernetes /dev/shm emptyDir; None: from the plan (at least 16Gi)
    hf_cache: str = ".cache/huggingface"  # under $HOME, for the containers' model cache
    source: str | None = None  # the launch file, for the header comment
    checked: bool = False  # the flags went through `oomguard check --fix`
    secrets_file: str | None = None  # where the secret values are written (mode 0600), for the notes
    user: str = "vllm"  # systemd User=
    resources: Any = None  # export.resources.Resources (host RAM, /dev/shm, timeouts) from the plan


@dataclass
class Rendered:
    text: str
    notes: list[str] = field(default_factory=list)
    structure: Any = None  # what the renderer meant to write, in the target's terms (readback.py)
    secrets: dict[str, str | None] = field(default_factory=dict)  # NAME -> value, for the secrets file only


@dataclass
class _Parts:
    """What every format needs, derived once from the launch."""

    model: str
    argv: list[Word]  # vLLM arguments, model as `--model` (the image's entry point takes both)
    serve_argv: list[Word]  # for `vllm serve MODEL ...` (positional model)
    secrets: SecretPlan
    port: int
    num_gpus: int
    devices: list[str] | None  # CUDA_VISIBLE_DEVICES, when the launch pins GPUs
    notes: list[str]

    @property
    def env(self) -> dict[str, str]:
        return self.secrets.env

    @property
    def secret_names(self) -> list[str]:
        return list(self.secrets.secrets)

    @property
    def container_secrets(self) -> list[str]:
        """Secrets the container itself must see: moved environment variables and those vLLM reads
        (``VLLM_API_KEY``), not the ones only a flag references (the caller's shell or compose expands those)."""
        refs = {n for names in self.secrets.moved.values() for n in names}
        return [n for n in self.secrets.secrets if n not in refs or n in self.secrets.dropped.values()]


_SENTINEL = "\x00oomguard-env:{}\x00"  # never a real value: NUL cannot be in one (fields.refuse_nul)


def _argv(model: str | None, flags: dict[str, Any], version: str | None, *, model_option: bool) -> list[Word]:
    """``flags_to_argv`` with EnvRef values kept as whole words."""
    plain: dict[str, Any] = {}
    for dest, value in flags.items():
        if isinstance(value, dict) or (isinstance(value, list) and flag_form(dest, version).value_type == "json"):
            plain[dest] = _json_text(value)
        elif isinstance(value, EnvRef):
            plain[dest] = _SENTINEL.format(value.name)
        elif isinstance(value, list) and any(isinstance(v, EnvRef) for v in value):
            plain[dest] = [_SENTINEL.format(v.name) if isinstance(v, EnvRef) else v for v in value]
        else:
            plain[dest] = value
    words: list[Word] = []
    for w in flags_to_argv(model, plain, version=version, model_option=model_option):
        m = re.fullmatch(_SENTINEL.replace("{}", "([A-Za-z_][A-Za-z0-9_]*)"), w)
        if m:
            words.append(EnvRef(m.group(1)))
        elif "\x00oomguard-env:" in w:
            raise AssertionError("a secret reference was merged into a larger word")  # a bug, caught by tests
        else:
            words.append(w)
    return words


def _json_text(value: Any) -> str:
    """Compact JSON, as vLLM's argparse reads it, with every control or line-separator character
    inside a string escaped (``\u2028``): the same JSON, and no target has to carry the raw character."""
    import json

    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return CONTROL.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def _check_words(words: list[Word]) -> None:
    """What no target can carry: a NUL in an argument (JSON values carry theirs as ``\u0000``)."""
    option = "the model"
    for w in words:
        if isinstance(w, str):
            if w.startswith("--"):
                option = w.split("=", 1)[0]
                if "=" in w:
                    refuse_nul(option, w)
                continue
            refuse_nul(option, w)


def _refuse_option_like(model: str, flags: dict[str, Any]) -> None:
    """A word vLLM's argparse would take for an option cannot be written where a value stands alone:
    the positional model, or an item of a multi-word list (``--served-model-name a --x``)."""
    if model.startswith("-"):
        raise InputError("the model: starts with '-', which vLLM reads as an option: refused")
    for dest, value in flags.items():
        if isinstance(value, list):
            for item in value:
                if isinstance(item, str) and item.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", item):
                    raise InputError(f"--{dest.replace('_', '-')}: an item starts with '-', which vLLM reads as an "
                                     "option: refused")


def _check_env(env: dict[str, str]) -> None:
    for k, v in env.items():
        check_env_name(k)
        refuse_nul(f"environment variable {k}", v)


def _parts(launch: Any, opts: ExportOptions) -> _Parts:
    version = opts.vllm_version or getattr(launch, "version", None)
    model = launch.model
    if not model:
        raise InputError("the launch names no model (vllm serve MODEL)", file=getattr(launch, "path", None))
    env_in = dict(getattr(launch, "env", None) or {})
    _check_env(env_in)
    try:
        plan = plan_for(launch)
    except ValueError as exc:
        raise InputError(f"export: {exc}") from None
    flags = plan.flags
    tp = _int(flags.get("tensor_parallel_size"))
    pp = _int(flags.get("pipeline_parallel_size"))
    dp = _int(flags.get("data_parallel_size"))
    devices = None
    cvd = plan.env.get("CUDA_VISIBLE_DEVICES")
    if cvd:
        devices = [d.strip() for d in cvd.split(",") if d.strip()]
    port = _int(flags.get("port"), DEFAULT_PORT)
    if not 0 < port < 65536:
        raise InputError(f"--port {port}: not a TCP port")
    notes = list(plan.notes)
    ref = getattr(flags.get("port"), "name", None)
    if ref:  # --port "$PORT": the server listens where the variable says; the published port is a number
        notes.append(f"--port is ${ref}: the published port, health checks and probes assume {DEFAULT_PORT} "
                     f"(vLLM's default); set --port to a number in the launch if ${ref} is another")
    refuse_nul("the model", model)
    _refuse_option_like(model, flags)
    argv = _argv(model, flags, version, model_option=True)
    _check_words(argv)
    return _Parts(
        model=model,
        argv=argv,
        serve_argv=_argv(model, flags, version, model_option=False),
        secrets=plan,
        port=port,
        num_gpus=max(1, tp * pp * dp),
        devices=devices,
        notes=notes,
    )


def _int(value: Any, default: int = 1) -> int:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        return default


def image_for(opts: ExportOptions, launch: Any) -> str:
    if opts.image:
        return opts.image
    version = opts.vllm_version or getattr(launch, "version", None)
    if version and version not in ("latest", "newest"):
        return f"{DEFAULT_IMAGE}:v{str(version).lstrip('v')}"
    return f"{DEFAULT_IMAGE}:latest"


def header_lines(opts: ExportOptions, target: Target) -> list[str]:
    """The comment at the top of every export (the file name shown escaped: it is not a line of ours)."""
    src = f" from {visible(opts.source)}" if opts.source else ""
    first = f"# generated by `oomguard export launch --to {target.value}`{src}"
    if opts.checked:
        second = "# the flags are the ones `oomguard check --fix` corrected and checked: keep them"
    else:
        second = "# the flags are as given, not run through `oomguard check` (export with --fix to check and correct them)"
    return [first.rstrip(), second]


def _container_notes(launch: Any, parts: _Parts) -> list[str]:
    notes = []
    host = launch.flags.get("host")
    if host in ("127.0.0.1", "localhost", "::1"):
        notes.append(f"--host {host} inside a container is unreachable from outside it; use 0.0.0.0 or drop --host")
    if parts.devices:
        notes.append(
            "CUDA_VISIBLE_DEVICES became the container's GPU selection (inside, the GPUs are renumbered from 0)"
        )
    return notes


def _container_env(parts: _Parts) -> dict[str, str]:
    return {k: v for k, v in parts.env.items() if k != "CUDA_VISIBLE_DEVICES"}


def _secrets_note(parts: _Parts, opts: ExportOptions, where: str, skip: Any = ()) -> list[str]:
    """Where the secrets go; ``skip``: names the target takes from elsewhere (a manifest's own valueFrom)."""
    wanted = [k for k in parts.secret_names if k not in skip]
    if not wanted:
        return []
    names = ", ".join(wanted)
    if opts.secrets_file:
        return [f"secrets {names}: values written to {visible(opts.secrets_file)} (mode 0600); {where}"]
    return [f"secrets {names}: not written anywhere; {where} (export with --secrets-file FILE to write them, mode 0600)"]


def _resources(launch: Any, opts: ExportOptions):
    from oomguard.export.resources import resources_for

    return opts.resources if opts.resources is not None else resources_for(launch, opts.vllm_version or getattr(launch, "version", None))


# -- systemd --------------------------------------------------------------------


def env_file_path(opts: ExportOptions) -> str:
    if opts.secrets_file and opts.secrets_file.startswith("/"):
        return opts.secrets_file
    return f"/etc/vllm/{opts.name}.env"


def render_systemd(launch: Any, opts: ExportOptions) -> Rendered:
    from oomguard.export.systemd import (
        SystemdQuoteError,
        quote_assignment,
        quote_program,
        quote_word,
        text_value,
    )

    p = _parts(launch, opts)
    res = _resources(launch, opts)
    notes = list(p.notes)
    settings: list[tuple[str, str, Any]] = []  # (section, key, intended value)
    lines = header_lines(opts, Target.SYSTEMD)
    intended: list[tuple] = [("comment", None, line) for line in lines]

    def section(name: str) -> None:
        if lines[-1] != "" and name != "Unit":
            lines.append("")
            intended.append(("blank",))
        lines.append(f"[{name}]")
        intended.append(("section", name))

    def setting(key: str, text: str, meant: Any) -> None:
        lines.append(f"{key}={text}")
        intended.append(("setting", key, meant))
        settings.append((key, text, meant))

    def comment(text: str) -> None:
        lines.append("# " + text)
        intended.append(("comment", None, "# " + text))

    section("Unit")
    description = f"vLLM OpenAI-compatible server ({p.model})"
    setting("Description", text_value(description), text_value(description))
    setting("After", "network-online.target", "network-online.target")
    setting("Wants", "network-online.target", "network-online.target")
    setting("StartLimitIntervalSec", str(res.start_limit_interval_s), str(res.start_limit_interval_s))
    setting("StartLimitBurst", str(res.start_limit_burst), str(res.start_limit_burst))
    section("Service")
    setting("Type", "simple", "simple")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", opts.user):
        raise InputError(f"--user {visible(opts.user[:40])!r}: not a valid user name")
    setting("User", opts.user, opts.user)
    for k, v in p.env.items():
        try:
            setting("Environment", quote_assignment(k, v), (f"{k}={v}",))
        except SystemdQuoteError as exc:
            raise InputError(f"environment variable {k}: {exc}: refused for --to systemd") from None
    env_file = env_file_path(opts)
    if p.secret_names:
        comment(f"{', '.join(p.secret_names)}: set in {env_file} (mode 0600), never in the unit")
    # "-": an optional file when the launch has no secrets; required when it has (a server that
    # should ask for an API key must not start without one)
    env_file_value = env_file if p.secret_names else "-" + env_file
    refuse_control("the secrets file path", env_file)
    setting("EnvironmentFile", quote_word(env_file_value) if " " in env_file_value else env_file_value, env_file_value)
    try:
        program = quote_program(opts.vllm_bin)
    except SystemdQuoteError as exc:
        raise InputError(f"--vllm-bin: {exc}") from None
    raw_words: list[Word] = ["serve", *p.serve_argv]
    try:
        quoted = [program, *(quote_word(w) for w in raw_words)]
    except SystemdQuoteError as exc:
        raise InputError(f"a flag value {exc}: refused") from None
    groups: list[list[str]] = []
    for q, raw in zip(quoted, [opts.vllm_bin, *raw_words], strict=True):
        if (isinstance(raw, str) and raw.startswith("--")) or not groups:
            groups.append([q])
        else:
            groups[-1].append(q)
    head = groups[0]
    while len(groups) > 1 and not groups[1][0].startswith("--"):
        head += groups.pop(1)
    meant_argv = (opts.vllm_bin, *raw_words)
    lines.append("ExecStart=" + " \\\n    ".join(" ".join(g) for g in groups))
    intended.append(("setting", "ExecStart", meant_argv))
    setting("Restart", "on-failure", "on-failure")
    setting("RestartSec", str(res.restart_sec), str(res.restart_sec))
    comment(f"loading weights, profiling memory and capturing CUDA graphs: {res.timeout_why}")
    setting("TimeoutStartSec", str(res.timeout_start_s), str(res.timeout_start_s))
    if res.memory_max_bytes:
        comment(f"host RAM from the plan: {res.memory_why}")
        setting("MemoryMax", str(res.memory_max_bytes), str(res.memory_max_bytes))
    comment("the kernel's OOM killer should pick another process before the server (a host OOM)")
    setting("OOMScoreAdjust", str(res.oom_score_adj), str(res.oom_score_adj))
    setting("LimitNOFILE", "65536", "65536")
    section("Install")
    setting("WantedBy", "multi-user.target", "multi-user.target")
    notes += _secrets_note(p, opts, f"the unit reads them from EnvironmentFile={env_file}")
    if res.memory_max_bytes:
        notes.append(f"MemoryMax={res.memory_max_bytes} ({res.memory_max_bytes / (1 << 30):.0f} GiB): {res.memory_why}")
    return Rendered("\n".join(lines) + "\n", notes, intended, dict(p.secrets.secrets))


# -- docker run ---------------------------------------------------------------------


def render_docker(launch: Any, opts: ExportOptions) -> Rendered:
    from oomguard.export.shell import join, quote

    p = _parts(launch, opts)
    res = _resources(launch, opts)
    notes = p.notes + _container_notes(launch, p)
    image = image_for(opts, launch)
    groups: list[list[Word]] = [["docker", "run", "-d", "--name", opts.name]]
    groups.append(["--gpus", "all" if not p.devices else f'"device={",".join(p.devices)}"'])
    groups.append(["--ipc=host"])  # /dev/shm is the host's: NCCL and the CPU KV tier's file fit
    groups.append(["-p", f"{p.port}:{p.port}"])
    if res.memory_max_bytes:
        groups.append(["--memory", f"{res.memory_max_bytes // (1 << 20)}m"])
    groups.append(["-v", EnvRef("HOME", f"/{opts.hf_cache}:/root/.cache/huggingface")])
    if p.model.startswith("/"):
        if ":" in p.model or "," in p.model:
            raise InputError("the model path contains ':' or ',', which docker's -v cannot mount: use --to compose")
        groups.append(["-v", f"{p.model}:{p.model}:ro"])
    fields: dict[int, str] = {}
    for k, v in _container_env(p).items():
        fields[len(groups)] = f"environment variable {k}"
        groups.append(["-e", f"{k}={v}"])
    for k in p.container_secrets:
        groups.append(["-e", k])  # passed through from the caller's environment, value never on the line
    groups.append([image])
    for g in _option_groups(p.argv):
        groups.append(g)
    try:
        text_lines = [join(g, fields.get(i)) for i, g in enumerate(groups)]
    except ShellQuoteError as exc:
        raise InputError(f"{exc}: refused for --to docker") from None
    del quote
    head = header_lines(opts, Target.DOCKER)
    text = "\n".join(head) + "\n" + " \\\n  ".join(text_lines) + "\n"
    words = [w for g in groups for w in g]
    notes += _secrets_note(p, opts, "docker takes them from the calling shell's environment (-e NAME, \"$NAME\")"
                           + (f": set -a; . {visible(opts.secrets_file)}; set +a" if opts.secrets_file else ""))
    return Rendered(text, notes, {"comments": head, "words": words}, dict(p.secrets.secrets))


def _option_groups(argv: list[Word]) -> list[list[Word]]:
    groups: list[list[Word]] = []
    for w in argv:
        if (isinstance(w, str) and w.startswith("--")) or not groups:
            groups.append([w])
        else:
            groups[-1].append(w)
    return groups


# -- compose and Kubernetes (YAML with $-interpolation) --------------------------------


def _dollar(word: Word, ref: str) -> str:
    """Compose and Kubernetes both read ``$$`` as a literal ``$``; an EnvRef is their reference."""
    if isinstance(word, EnvRef):
        return ref.format(word.name) + word.suffix.replace("$", "$$")
    return word.replace("$", "$$")


def _yaml_checked(text_of, what: str) -> str:
    try:
        return text_of()
    except Exception as exc:  # noqa: BLE001 - the emitter refuses what YAML cannot hold
        raise InputError(f"{what}: the YAML emitter refused a value ({type(exc).__name__})") from None


def render_compose(launch: Any, opts: ExportOptions) -> Rendered:
    from oomguard.export.yamlout import dump

    p = _parts(launch, opts)
    res = _resources(launch, opts)
    notes = p.notes + _container_notes(launch, p)
    volumes: list[Any] = ["${HOME}/" + opts.hf_cache + ":/root/.cache/huggingface"]
    if p.model.startswith("/"):
        volumes.append({"type": "bind", "source": _dollar(p.model, ""), "target": _dollar(p.model, ""), "read_only": True})
    device: dict[str, Any] = {"driver": "nvidia", "capabilities": ["gpu"]}
    if p.devices:
        device["device_ids"] = list(p.devices)
    else:
        device["count"] = p.num_gpus
    service: dict[str, Any] = {
        "image": _dollar(image_for(opts, launch), ""),
        "command": [_dollar(w, "${{{}}}") for w in p.argv],
        "ipc": "host",
        "ports": [f"{p.port}:{p.port}"],
        "volumes": volumes,
    }
    env: dict[str, str] = {k: _dollar(v, "") for k, v in _container_env(p).items()}
    for k in p.container_secrets:
        env[k] = "${" + k + "}"  # from the shell or the --env-file of `docker compose`
    if env:
        service["environment"] = env
    resources: dict[str, Any] = {"reservations": {"devices": [device]}}
    if res.memory_max_bytes:
        resources["limits"] = {"memory": f"{res.memory_max_bytes // (1 << 20)}M"}
    service["deploy"] = {"resources": resources}
    service["restart"] = "on-failure"
    data = {"services": {opts.name: service}}
    head = header_lines(opts, Target.COMPOSE)
    text = "\n".join(head) + "\n" + _yaml_checked(lambda: dump(data), "--to compose")
    notes += _secrets_note(p, opts, "compose interpolates ${NAME} from the shell or `docker compose --env-file FILE`")
    return Rendered(text, notes, {"comments": head, "docs": [data]}, dict(p.secrets.secrets))


def render_kubernetes(launch: Any, opts: ExportOptions) -> Rendered:
    from oomguard.export.yamlout import dump_all

    p = _parts(launch, opts)
    res = _resources(launch, opts)
    notes = p.notes + _container_notes(launch, p)
    if p.devices:
        notes.append("Kubernetes picks the GPUs itself: the pinned CUDA_VISIBLE_DEVICES became a GPU count")
    env: list[dict[str, Any]] = [{"name": k, "value": _dollar(v, "")} for k, v in _container_env(p).items()]
    secret_name = f"{opts.name}-secrets"
    for k in p.secret_names:
        kept = p.secrets.env_from.get(k)  # the manifest's own valueFrom, as it was
        env.append({"name": k, "valueFrom": kept.spec if kept is not None else
                    {"secretKeyRef": {"name": secret_name, "key": k}}})
    gpus = str(len(p.devices) if p.devices else p.num_gpus)
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}}
    if res.memory_max_bytes:
        limit = f"{-(-res.memory_max_bytes // (1 << 30))}Gi"
        request = f"{-(-(res.memory_request_bytes or res.memory_max_bytes) // (1 << 30))}Gi"
        resources["requests"]["memory"] = request
        resources["limits"]["memory"] = limit
        notes.append(f"memory request {request} (the expected need) and limit {limit}: {res.memory_why}")
    shm = opts.shm_size or res.shm_size
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "hf-cache", "mountPath": "/root/.cache/huggingface"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}},
        {"name": "hf-cache", "emptyDir": {}},
    ]
    if res.shm_why and not opts.shm_size:
        notes.append(f"/dev/shm sizeLimit {shm}: {res.shm_why}")
    notes.append("the hf-cache volume is an emptyDir: replace it with a PersistentVolumeClaim to keep downloads")
    if p.model.startswith("/"):
        mounts.append({"name": "model", "mountPath": p.model, "readOnly": True})
        volumes.append({"name": "model", "hostPath": {"path": p.model, "type": "Directory"}})
    probe = {"httpGet": {"path": "/health", "port": p.port}}
    container: dict[str, Any] = {
        "name": opts.name,
        "image": image_for(opts, launch),
        "args": [_dollar(w, "$({})") for w in p.argv],
        "ports": [{"name": "http", "containerPort": p.port}],
        "resources": resources,
        "volumeMounts": mounts,
        "readinessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 3},
        "startupProbe": {**probe, "periodSeconds": 10, "failureThreshold": max(1, -(-res.timeout_start_s // 10))},
        "livenessProbe": {**probe, "periodSeconds": 30, "failureThreshold": 3},
    }
    if env:
        container["env"] = env
    labels = {"app.kubernetes.io/name": opts.name}
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": opts.name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container], "volumes": volumes}},
        },
    }
    head = header_lines(opts, Target.KUBERNETES)
    text = "\n".join(head) + "\n" + _yaml_checked(lambda: dump_all([doc]), "--to kubernetes")
    notes += _secrets_note(
        p, opts, f"the Deployment reads them from the Secret {secret_name} (secretKeyRef): "
        f"kubectl create secret generic {secret_name} --from-env-file={visible(opts.secrets_file or 'FILE')}",
        skip=p.secrets.env_from,
    )
    return Rendered(text, notes, {"comments": head, "docs": [doc]}, dict(p.secrets.secrets))


# -- env file and --config YAML ---------------------------------------------------------


def env_file_lines(env: dict[str, str], secrets: dict[str, str | None], *, with_values: bool) -> tuple[list[str], list[tuple]]:
    """``NAME=value`` lines (and the intended structure) for docker --env-file / systemd EnvironmentFile=."""
    from oomguard.export.shell import env_value

    lines: list[str] = []
    meant: list[tuple] = []
    for k, v in [*env.items(), *((k, (v or "") if with_values else "") for k, v in secrets.items())]:
        check_env_name(k)
        refuse_control(f"environment variable {k}", v, why="an env file has no escape for it")
        if k in secrets and not with_values:
            lines.append(f"# {k}: fill in here, and keep this file mode 0600")
            meant.append(("comment", lines[-1]))
        lines.append(f"{k}={env_value(v)}")
        meant.append(("assign", k, v))
    return lines, meant


def render_env(launch: Any, opts: ExportOptions, *, with_values: bool = False) -> Rendered:
    from oomguard.export.shell import env_value, join

    p = _parts(launch, opts)
    notes = list(p.notes)
    head = header_lines(opts, Target.ENV) + ["# environment of the launch (docker --env-file, systemd EnvironmentFile=)"]
    body, meant = env_file_lines(p.env, p.secrets.secrets, with_values=with_values)
    for k, v in p.env.items():
        if env_value(v) != v:
            notes.append(f"{k}: the value needs quoting; docker --env-file would keep the quotes literally")
    try:
        flags_comment = "# the flags themselves: vllm serve " + join(p.serve_argv)
    except ShellQuoteError:  # a comment for people: shown escaped rather than refused
        flags_comment = "# the flags themselves (shown escaped): vllm serve " + visible(" ".join(map(str, p.serve_argv)))
    if CONTROL.search(flags_comment):  # ANSI-C quoting leaves none; a comment must stay one line
        raise AssertionError("control character in the env file's comment")
    lines = head + body + [flags_comment]
    meant = [("comment", h) for h in head] + meant + [("comment", flags_comment)]
    if p.secret_names:
        if with_values:
            notes.append(f"secrets {', '.join(p.secret_names)}: their values are in this file: it is written with mode 0600")
        else:
            notes.append(f"secrets {', '.join(p.secret_names)}: left empty here (printed output never holds them); "
                         "export with -o FILE to write them (mode 0600)")
    return Rendered("\n".join(lines) + "\n", notes, meant, dict(p.secrets.secrets))


def parse_env_file(text: str) -> dict[str, str]:
    """Read back an env file written by ``render_env`` (comments and blank lines skipped)."""
    return {k: v for kind, *rest in parse_env_lines(text) if kind == "assign" for k, v in [rest]}


def parse_env_lines(text: str) -> list[tuple]:
    """Every line of an env file: ``("comment", text)`` or ``("assign", name, value)``; ValueError otherwise."""
    import shlex

    out: list[tuple] = []
    for line in re.split(r"\r\n|[\n\r]", text.rstrip("\n")) if text else []:
        s = line.strip()
        if s.startswith("#"):
            out.append(("comment", line))
            continue
        k, eq, v = line.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise ValueError(f"env file line is not NAME=value: {visible(line[:40])!r}")
        words = shlex.split(v) if v else [""]
        if len(words) != 1:
            raise ValueError(f"env file value of {k} is not one word")
        out.append(("assign", k, words[0]))
    return out


def render_yaml(launch: Any, opts: ExportOptions) -> Rendered:
    import json

    from oomguard.export.shell import join
    from oomguard.export.yamlout import dump

    p = _parts(launch, opts)
    notes = list(p.notes)
    version = opts.vllm_version or getattr(launch, "version", None)
    data: dict[str, Any] = {"model": p.model}
    by_reference: list[Word] = []  # a --config file cannot read the environment: these go on the command line
    for dest, value in p.secrets.flags.items():
        if value is None:
            continue
        form = flag_form(dest, version)
        key = form.option[2:]
        if isinstance(value, EnvRef) or (isinstance(value, list) and any(isinstance(v, EnvRef) for v in value)):
            by_reference += _argv(None, {dest: value}, version, model_option=False)
            continue
        if isinstance(value, bool) and not (form.known and form.takes_value):
            if value:
                if form.has_positive:
                    data[key] = True
            elif form.negative:
                # `x: false` is dropped by older vLLM config loaders; the negative option is not
                data[form.negative[2:]] = True
            continue
        if isinstance(value, (dict, list)) and form.value_type == "json":
            data[key] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        elif isinstance(value, (list, tuple)):
            data[key] = list(value)
        else:
            data[key] = value
    head = header_lines(opts, Target.YAML)
    try:
        run = "# run: vllm serve --config " + join([f"{opts.name}.yaml", *by_reference])
    except ShellQuoteError as exc:
        raise InputError(f"{exc}: refused for --to yaml") from None
    head.append(run)
    if p.env or p.secret_names:
        try:
            env_line = "# environment (not part of --config): " + join(
                [f"{k}={v}" for k, v in p.env.items()] + [f"{k}=<secret>" for k in p.secrets.secrets]
            )
        except ShellQuoteError as exc:
            raise InputError(f"{exc}: refused for --to yaml") from None
        head.append(env_line)
    if by_reference:
        notes.append("a vLLM --config file cannot read the environment: the flags holding credentials are on the "
                     "`run:` line, as references to the variables")
    text = "\n".join(head) + "\n" + _yaml_checked(lambda: dump(data), "--to yaml")
    notes += _secrets_note(p, opts, "set them in the server's environment")
    return Rendered(text, notes, {"comments": head, "docs": [data]}, dict(p.secrets.secrets))


_RENDERERS = {
    Target.SYSTEMD: render_systemd,
    Target.DOCKER: render_docker,
    Target.COMPOSE: render_compose,
    Target.KUBERNETES: render_kubernetes,
    Target.ENV: render_env,
    Target.YAML: render_yaml,
}


_DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# docker's reference grammar, loosely: [host[:port]/]path[:tag][@digest]; no spaces, quotes or $
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-/:@+]{0,511}")


def check_name(name: str, target: Target | str) -> None:
    """Refuse a ``--name`` the target would reject (or that would escape its file path).

    Kubernetes: an RFC 1123 DNS label (the Deployment, Service and ``NAME-secrets`` Secret);
    elsewhere docker's container-name rule, which also keeps ``/etc/vllm/NAME.env`` one file.
    """
    target = Target(target)
    shown = repr(visible(name[:70]))
    if target is Target.KUBERNETES:
        if not _DNS_LABEL.fullmatch(name):
            raise InputError(f"--name {shown}: not a valid Kubernetes name (lower-case letters, digits and '-', "
                             "starting and ending with a letter or digit, at most 63 characters)")
        return
    if not _CONTAINER_NAME.fullmatch(name):
        raise InputError(f"--name {shown}: use letters, digits, '_', '.' and '-' (starting with a letter or digit, "
                         "at most 128 characters)")


def check_image(image: str) -> None:
    if not _IMAGE.fullmatch(image):
        raise InputError(f"--image {visible(image[:70])!r}: not a container image reference "
                         "(letters, digits and . _ - / : @ +)")


def render_launch(launch: Any, target: Target | str, opts: ExportOptions | None = None) -> Rendered:
    """Render ``launch`` (an ``oomguard.inputs.launch.Launch``) for ``target``."""
    target = Target(target)
    opts = opts or ExportOptions()
    if opts.image:
        check_image(opts.image)
    return _RENDERERS[target](launch, opts)
