"""Freeze a verified launch into the service definition that will run it.

One ``Launch`` (model, typed flags, environment) becomes a systemd unit, a
``docker run`` line, a compose service, a Kubernetes Deployment, an env file
or a vLLM ``--config`` YAML, with the same flags so that a restart cannot
bring back the old ones. Each format has its own quoting: POSIX shell for
the docker line, systemd's own rules for ``ExecStart=`` (``systemd.py``),
``$$`` for compose's and Kubernetes' variable interpolation, and JSON strings
for JSON-valued flags in YAML (vLLM's older config loaders ``str()`` a
mapping). Reading any output back with oomguard's launch readers gives the
same flags (``tests/unit/export`` checks it property by property).

Credentials never appear: ``--api-key`` and similar flags, and secret-looking
environment variables, become references to an environment variable or a
Kubernetes Secret that the operator fills in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from oomguard.inputs.render import (
    flag_form,
    flags_to_argv,
    is_secret_dest,
    is_secret_env,
    secret_env_for,
    shell_command,
    shell_quote,
)

DEFAULT_IMAGE = "vllm/vllm-openai"
DEFAULT_PORT = 8000


class Target(str, Enum):
    SYSTEMD = "systemd"
    DOCKER = "docker"
    COMPOSE = "compose"
    KUBERNETES = "kubernetes"
    ENV = "env"
    YAML = "yaml"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ExportOptions:
    vllm_version: str | None = None  # for flag spellings and the image tag
    name: str = "vllm"
    image: str | None = None  # default vllm/vllm-openai:v<version> (or :latest)
    vllm_bin: str = "/usr/local/bin/vllm"  # systemd's ExecStart needs a path
    shm_size: str = "16Gi"  # Kubernetes /dev/shm emptyDir (tensor parallel uses shared memory)
    hf_cache: str = "$HOME/.cache/huggingface"
    source: str | None = None  # the launch file, for the header comment


@dataclass
class Rendered:
    text: str
    notes: list[str] = field(default_factory=list)


@dataclass
class _Parts:
    """What every format needs, derived once from the launch."""

    model: str | None
    argv: list[str]  # vLLM arguments, model as `--model` (the image's entry point takes both)
    serve_argv: list[str]  # for `vllm serve MODEL ...` (positional model)
    env: dict[str, str]  # plain environment variables
    secret_env: list[str]  # names the operator must provide (values never written)
    port: int
    num_gpus: int
    devices: list[str] | None  # CUDA_VISIBLE_DEVICES, when the launch pins GPUs
    notes: list[str]


def _parts(launch: Any, opts: ExportOptions) -> _Parts:
    flags = dict(launch.flags)
    version = opts.vllm_version or getattr(launch, "version", None)
    notes: list[str] = []
    secret_env: list[str] = []
    for dest in [d for d in flags if is_secret_dest(d)]:
        value = flags.pop(dest)
        if value in (None, False, True):  # e.g. --hf-token with no value: nothing secret
            if value is True:
                flags[dest] = value
            continue
        name = secret_env_for(dest)
        secret_env.append(name)
        notes.append(f"--{dest.replace('_', '-')} was not written out: provide it as environment variable {name}")
    for dest in list(flags):
        name = _nested_secret_env(dest, flags[dest])
        if name:
            flags[dest] = _SENTINEL.format(name)
            secret_env.append(name)
            notes.append(
                f"--{dest.replace('_', '-')} holds credentials inside its JSON: its whole value moved to the "
                f"environment variable {name} (set it to the JSON), which the unit references"
            )
    env: dict[str, str] = {}
    for k, v in (getattr(launch, "env", None) or {}).items():
        if is_secret_env(k):
            if k not in secret_env:
                secret_env.append(k)
                notes.append(f"environment variable {k} looks like a credential: its value was not written out")
        else:
            env[k] = str(v)
    model = launch.model
    tp = int(flags.get("tensor_parallel_size") or 1)
    pp = int(flags.get("pipeline_parallel_size") or 1)
    dp = int(flags.get("data_parallel_size") or 1)
    devices = None
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd:
        devices = [d.strip() for d in cvd.split(",") if d.strip()]
    try:
        port = int(flags.get("port") or DEFAULT_PORT)
    except (TypeError, ValueError):
        port = DEFAULT_PORT
    return _Parts(
        model=model,
        argv=flags_to_argv(model, flags, version=version, model_option=True),
        serve_argv=flags_to_argv(model, flags, version=version),
        env=env,
        secret_env=secret_env,
        port=port,
        num_gpus=max(1, tp * pp * dp),
        devices=devices,
        notes=notes,
    )


# A JSON-valued flag holding a credential is replaced by this placeholder, which each target
# turns into its own reference to an environment variable (see render_launch). The
# characters are ones every quoting rule here leaves alone.
_SENTINEL = "@@OOMGUARD_ENV_{}@@"
_REFERENCE = {
    "systemd": "${{{}}}",  # systemd expands ${NAME} inside ExecStart words (one argument)
    "docker": '"${}"',  # the caller's shell expands it; -e NAME passes it in
    "compose": "${{{}}}",  # compose interpolates from the shell or the .env file
    "kubernetes": "$({})",  # Kubernetes expands $(NAME) in args from the container's env
    "env": '"${}"',
    "yaml": "<set from ${}: a --config file cannot reference the environment>",
}


def _nested_secret_env(dest: str, value: Any) -> str | None:
    """The environment variable a JSON-valued flag's value moves to, when the JSON holds a secret."""
    from oomguard.redact import redact_data

    parsed = value
    if isinstance(value, str):
        if value.strip()[:1] not in "{[":
            return None
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return None
    if not isinstance(parsed, (dict, list)) or redact_data(parsed) == parsed:
        return None
    return "SECRET_" + dest.upper().replace("-", "_")


def moved_secret_flags(flags: dict[str, Any]) -> dict[str, str]:
    """``{dest: environment variable}`` for the JSON-valued flags whose value moved to the environment."""
    return {dest: name for dest, value in flags.items() if (name := _nested_secret_env(dest, value))}


def placeholder_text(text: str, target: Target | str, moved: dict[str, str]) -> str:
    """``text`` with each environment reference replaced by an empty JSON object (for reading it back)."""
    target = Target(target)
    empty = "{}" if target is Target.SYSTEMD else "'{}'"
    for name in moved.values():
        ref = _REFERENCE[target.value].format(name)
        text = text.replace(f"'{ref}'", "'{}'").replace(f'"{ref}"', "'{}'").replace(ref, empty)
    return text


def _with_references(text: str, target: Target, secret_env: list[str]) -> str:
    for name in secret_env:
        text = text.replace(_SENTINEL.format(name), _REFERENCE[target.value].format(name))
    return text


def _image(opts: ExportOptions, launch: Any) -> str:
    if opts.image:
        return opts.image
    version = opts.vllm_version or getattr(launch, "version", None)
    if version and version not in ("latest", "newest"):
        return f"{DEFAULT_IMAGE}:v{str(version).lstrip('v')}"
    return f"{DEFAULT_IMAGE}:latest"


def _header(opts: ExportOptions, target: Target, comment: str = "#") -> str:
    src = f" from {opts.source}" if opts.source else ""
    return f"{comment} generated by `oomguard export launch --to {target.value}`{src}; the flags are the checked ones, keep them"


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


# -- systemd --------------------------------------------------------------------


def render_systemd(launch: Any, opts: ExportOptions) -> Rendered:
    from oomguard.export.systemd import quote_word

    p = _parts(launch, opts)
    lines = [
        _header(opts, Target.SYSTEMD),
        "[Unit]",
        f"Description=vLLM OpenAI-compatible server ({p.model})",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
    ]
    for k, v in p.env.items():
        lines.append("Environment=" + quote_word(f"{k}={v}"))
    if p.secret_env:
        lines.append(f"# {', '.join(p.secret_env)}: set in /etc/vllm/{opts.name}.env (mode 0600), never in the unit")
        lines.append(f"EnvironmentFile=-/etc/vllm/{opts.name}.env")
    words = [quote_word(w) for w in [opts.vllm_bin, "serve", *p.serve_argv]]
    groups: list[list[str]] = []
    for w, raw in zip(words, [opts.vllm_bin, "serve", *p.serve_argv], strict=True):
        if raw.startswith("--") or not groups:
            groups.append([w])
        else:
            groups[-1].append(w)
    # keep "vllm serve MODEL" on the first line
    head = groups[0]
    while len(groups) > 1 and not groups[1][0].startswith("--"):
        head += groups.pop(1)
    lines.append("ExecStart=" + " \\\n    ".join(" ".join(g) for g in groups))
    lines += [
        "Restart=on-failure",
        "RestartSec=10",
        "# loading weights and profiling memory can take minutes",
        "TimeoutStartSec=1200",
        "LimitNOFILE=65536",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return Rendered("\n".join(lines) + "\n", p.notes)


# -- docker run ---------------------------------------------------------------------


def render_docker(launch: Any, opts: ExportOptions) -> Rendered:
    p = _parts(launch, opts)
    notes = p.notes + _container_notes(launch, p)
    gpus = "all" if not p.devices else shell_quote(f'"device={",".join(p.devices)}"')
    pre = [
        f"docker run -d --name {shell_quote(opts.name)}",
        f"--gpus {gpus}",
        "--ipc=host",
        f"-p {p.port}:{p.port}",
        f'-v "{opts.hf_cache}:/root/.cache/huggingface"',
    ]
    if p.model and p.model.startswith("/"):
        pre.append("-v " + shell_quote(f"{p.model}:{p.model}:ro"))
    for k, v in _container_env(p).items():
        pre.append("-e " + shell_quote(f"{k}={v}"))
    for k in p.secret_env:
        pre.append(f"-e {k}")  # passed through from the caller's environment
    pre.append(shell_quote(_image(opts, launch)))
    text = shell_command([], p.argv, prefix_lines=pre)
    return Rendered(_header(opts, Target.DOCKER) + "\n" + text + "\n", notes)


# -- compose and Kubernetes (YAML with $-interpolation) --------------------------------


def _dollar(text: str) -> str:
    """Compose and Kubernetes both read ``$$`` as a literal ``$``."""
    return text.replace("$", "$$")


def _yaml(data: Any) -> str:
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # a shared dict is written twice, not as &id001
            return True

    def _str(dumper: yaml.SafeDumper, value: str) -> Any:
        # YAML folds U+0085/U+2028/U+2029 and other non-printables in plain or single-quoted
        # scalars; double quotes carry them as escapes
        odd = any(not c.isprintable() and c != " " for c in value)
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if odd else None)

    _NoAliases.add_representer(str, _str)
    return yaml.dump(
        data, Dumper=_NoAliases, sort_keys=False, width=100000, allow_unicode=True, default_flow_style=False
    )


def render_compose(launch: Any, opts: ExportOptions) -> Rendered:
    p = _parts(launch, opts)
    notes = p.notes + _container_notes(launch, p)
    volumes = [opts.hf_cache.replace("$HOME", "${HOME}") + ":/root/.cache/huggingface"]
    if p.model and p.model.startswith("/"):
        volumes.append(_dollar(f"{p.model}:{p.model}:ro"))
    device: dict[str, Any] = {"driver": "nvidia", "capabilities": ["gpu"]}
    if p.devices:
        device["device_ids"] = list(p.devices)
    else:
        device["count"] = p.num_gpus
    service: dict[str, Any] = {
        "image": _image(opts, launch),
        "command": [_dollar(w) for w in p.argv],
        "ipc": "host",
        "ports": [f"{p.port}:{p.port}"],
        "volumes": volumes,
    }
    env: dict[str, str] = {k: _dollar(v) for k, v in _container_env(p).items()}
    for k in p.secret_env:
        env[k] = "${" + k + "}"  # from the shell or an .env file next to the compose file
    if env:
        service["environment"] = env
    service["deploy"] = {"resources": {"reservations": {"devices": [device]}}}
    service["restart"] = "unless-stopped"
    text = _header(opts, Target.COMPOSE) + "\n" + _yaml({"services": {opts.name: service}})
    return Rendered(text, notes)


def _offload_bytes(flags: dict[str, Any]) -> int:
    """Host RAM the launch pins for KV offload / weight offload / swap (bytes, best effort)."""
    total = 0
    ktc = flags.get("kv_transfer_config")
    if isinstance(ktc, dict):
        extra = ktc.get("kv_connector_extra_config") or {}
        if isinstance(extra, dict) and isinstance(extra.get("cpu_bytes_to_use"), (int, float)):
            total += int(extra["cpu_bytes_to_use"])
    for dest in ("cpu_offload_gb", "swap_space"):
        v = flags.get(dest)
        if isinstance(v, (int, float)) and v > 0:
            total += int(v * (1 << 30))
    return total


def render_kubernetes(launch: Any, opts: ExportOptions) -> Rendered:
    p = _parts(launch, opts)
    notes = p.notes + _container_notes(launch, p)
    if p.devices:
        notes.append("Kubernetes picks the GPUs itself: the pinned CUDA_VISIBLE_DEVICES became a GPU count")
    env: list[dict[str, Any]] = [{"name": k, "value": _dollar(v)} for k, v in _container_env(p).items()]
    for k in p.secret_env:
        env.append({"name": k, "valueFrom": {"secretKeyRef": {"name": f"{opts.name}-secrets", "key": k}}})
    gpus = str(len(p.devices) if p.devices else p.num_gpus)
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}}
    offload = _offload_bytes(launch.flags)
    if offload:
        gib = -(-(offload + (16 << 30)) // (1 << 30))
        resources["requests"]["memory"] = f"{gib}Gi"
        notes.append(f"memory request {gib}Gi = host RAM the launch pins for offload + 16Gi for the server itself")
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "hf-cache", "mountPath": "/root/.cache/huggingface"},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": opts.shm_size}},
        {"name": "hf-cache", "emptyDir": {}},
    ]
    notes.append("the hf-cache volume is an emptyDir: replace it with a PersistentVolumeClaim to keep downloads")
    if p.model and p.model.startswith("/"):
        mounts.append({"name": "model", "mountPath": p.model, "readOnly": True})
        volumes.append({"name": "model", "hostPath": {"path": p.model, "type": "Directory"}})
    container: dict[str, Any] = {
        "name": opts.name,
        "image": _image(opts, launch),
        "args": [_dollar(w) for w in p.argv],
        "ports": [{"name": "http", "containerPort": p.port}],
        "resources": resources,
        "volumeMounts": mounts,
        "readinessProbe": {"httpGet": {"path": "/health", "port": p.port}, "periodSeconds": 10, "failureThreshold": 3},
        "startupProbe": {"httpGet": {"path": "/health", "port": p.port}, "periodSeconds": 10, "failureThreshold": 120},
        "livenessProbe": {"httpGet": {"path": "/health", "port": p.port}, "periodSeconds": 30, "failureThreshold": 3},
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
    return Rendered(_header(opts, Target.KUBERNETES) + "\n" + _yaml(doc), notes)


# -- env file and --config YAML ---------------------------------------------------------


def _env_value(v: str) -> str:
    """A value both docker's --env-file (literal) and systemd's EnvironmentFile read the same."""
    if v == "" or all(c.isalnum() or c in "_-.,/:@%+=" for c in v):
        return v
    return "'" + v.replace("'", "'\\''") + "'"


def render_env(launch: Any, opts: ExportOptions) -> Rendered:
    p = _parts(launch, opts)
    notes = list(p.notes)
    lines = [_header(opts, Target.ENV), "# environment of the launch (docker --env-file, systemd EnvironmentFile=)"]
    for k, v in p.env.items():
        ev = _env_value(v)
        if ev != v:
            notes.append(f"{k}: the value needs quoting; docker --env-file would keep the quotes literally")
        lines.append(f"{k}={ev}")
    for k in p.secret_env:
        lines.append(f"# {k}: fill in here, and keep this file mode 0600")
        lines.append(f"{k}=")
    lines.append(
        "# the flags themselves: vllm serve " + shell_command([], p.serve_argv, one_line=True).replace("\n", " ")
    )
    return Rendered("\n".join(lines) + "\n", notes)


def parse_env_file(text: str) -> dict[str, str]:
    """Read back an env file written by ``render_env`` (comments and blank lines skipped)."""
    import shlex

    env: dict[str, str] = {}
    for line in text.split("\n"):
        s = line.strip()
        if not s or s.startswith("#") or "=" not in s:
            continue
        k, _, v = s.partition("=")
        env[k] = "".join(shlex.split(v)) if v else ""
    return env


def render_yaml(launch: Any, opts: ExportOptions) -> Rendered:
    p = _parts(launch, opts)
    notes = list(p.notes)
    version = opts.vllm_version or getattr(launch, "version", None)
    data: dict[str, Any] = {}
    if p.model:
        data["model"] = p.model
    moved = moved_secret_flags(launch.flags)
    for dest, value in launch.flags.items():
        if value is None or is_secret_dest(dest) and value not in (True, False):
            continue
        if dest in moved:
            data[flag_form(dest, version).option[2:]] = _SENTINEL.format(moved[dest])
            continue
        form = flag_form(dest, version)
        key = form.option[2:]
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
    env_note = ""
    if p.env or p.secret_env:
        env_note = "# environment (not part of --config): " + " ".join(
            f"{k}={shell_quote(v)}" for k, v in p.env.items()
        )
        if p.secret_env:
            env_note += " " + " ".join(f"{k}=<secret>" for k in p.secret_env)
        env_note += "\n"
    text = _header(opts, Target.YAML) + f"\n# run: vllm serve --config {opts.name}.yaml\n" + env_note + _yaml(data)
    return Rendered(text, notes)


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


def check_name(name: str, target: Target | str) -> None:
    """Refuse a ``--name`` the target would reject (or that would escape its file path).

    Kubernetes: an RFC 1123 DNS label (the Deployment, Service and ``NAME-secrets`` Secret);
    elsewhere docker's container-name rule, which also keeps ``/etc/vllm/NAME.env`` one file.
    """
    from oomguard.errors import InputError

    target = Target(target)
    shown = repr(name[:70])
    if target is Target.KUBERNETES:
        if not _DNS_LABEL.fullmatch(name):
            raise InputError(f"--name {shown}: not a valid Kubernetes name (lower-case letters, digits and '-', "
                             "starting and ending with a letter or digit, at most 63 characters)")
        return
    if not _CONTAINER_NAME.fullmatch(name):
        raise InputError(f"--name {shown}: use letters, digits, '_', '.' and '-' (starting with a letter or digit, "
                         "at most 128 characters)")


def render_launch(launch: Any, target: Target | str, opts: ExportOptions | None = None) -> Rendered:
    """Render ``launch`` (an ``oomguard.inputs.launch.Launch``) for ``target``."""
    target = Target(target)
    opts = opts or ExportOptions()
    rendered = _RENDERERS[target](launch, opts)
    if "@@OOMGUARD_ENV_" in rendered.text:
        secret_env = _parts(launch, opts).secret_env
        rendered.text = _with_references(rendered.text, target, secret_env)
        if target is Target.YAML:
            rendered.notes.append("a vLLM --config file cannot read the environment: fill in the flag marked <set from ...>")
    return rendered
