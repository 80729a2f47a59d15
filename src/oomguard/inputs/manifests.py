"""Launches as operators write them at scale: Kubernetes manifests, docker-compose services, Helm values.

Each becomes the same ``Launch`` a script gives (``oomguard.inputs.launch``),
with the deployment's own facts alongside in ``launch.deployment``:

- Kubernetes (``Deployment`` / ``StatefulSet`` / ``DaemonSet`` / ``Job`` /
  ``Pod``, and KServe's ``ServingRuntime``), several documents per file: the
  vLLM container's ``command`` / ``args`` / ``env``; ``resources.limits``
  ``nvidia.com/gpu`` and ``memory``; the ``/dev/shm`` volume (an ``emptyDir``
  with ``medium: Memory`` and its ``sizeLimit``; none: the runtime's 64 MiB).
- docker-compose: the vLLM service's ``command``, ``environment``,
  ``shm_size`` (or ``ipc: host``), ``deploy.resources`` (memory, GPU devices),
  ``mem_limit``, ``gpus``.
- Helm values of vllm-project/production-stack (``servingEngineSpec.modelSpec[]``:
  ``modelURL``, ``vllmConfig`` — camelCase vLLM options plus ``extraArgs`` —,
  ``requestGPU``, ``limitMemory`` / ``requestMemory``, ``shmSize``, ``env``,
  ``lmcacheConfig``).

``deployment``: ``{"kind", "name", "container", "gpus", "memory_limit_bytes",
"shm_bytes", "shm_source"}`` (None where the file does not say). Anything that
is not one of these is a one-line ``InputError`` naming the file and line.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from oomguard.errors import InputError
from oomguard.units import GiB, MiB

__all__ = ["is_manifest", "manifest_command", "read_manifest", "parse_quantity", "parse_docker_size"]

WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "Pod", "ReplicaSet", "ServingRuntime"}
RUNTIME_SHM_DEFAULT = 64 * MiB  # Docker's and containerd's /dev/shm without a volume
_K8S_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_DOCKER_UNITS = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_quantity(value: Any, *, file: str | None = None, line: int | None = None) -> int:
    """A Kubernetes quantity (``16Gi``, ``500M``, ``1.5Gi``, ``1e9``) in bytes."""
    text = str(value).strip()
    m = re.fullmatch(r"([0-9.]+(?:[eE][0-9]+)?)\s*([KMGTP]i|[kKMGTP])?", text)
    if not m:
        raise InputError(f"not a Kubernetes quantity: {text!r} (e.g. 16Gi)", file=file, line=line)
    return int(float(m.group(1)) * _K8S_UNITS.get(m.group(2) or "", 1))


def parse_docker_size(value: Any, *, file: str | None = None, line: int | None = None) -> int:
    """A Docker size (``16g``, ``16gb``, ``512m``, ``1073741824``) in bytes."""
    text = str(value).strip().lower()
    m = re.fullmatch(r"([0-9.]+)\s*([bkmgt])?b?", text)
    if not m:
        raise InputError(f"not a Docker size: {text!r} (e.g. 16g)", file=file, line=line)
    return int(float(m.group(1)) * _DOCKER_UNITS.get(m.group(2) or "b", 1))


def _load_all(text: str, path: str) -> list[tuple[Any, Any]]:
    """(data, node) per YAML document; a one-line error on bad YAML."""
    # One call site for YAML, so the bounded safe loader of oomguard.inputs can replace it.
    import yaml

    try:
        nodes = list(yaml.compose_all(text))
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", file=path, line=mark.line + 1 if mark else None) from None
    return [(d, n) for d, n in zip(docs, nodes) if d is not None]


def _line(node: Any, *keys: Any) -> int | None:
    """The 1-based line of ``keys`` under a composed YAML node (the deepest one found)."""
    line = node.start_mark.line + 1 if node is not None and hasattr(node, "start_mark") else None
    for key in keys:
        if node is None:
            break
        nxt = None
        if hasattr(node, "value") and isinstance(node.value, list):
            if isinstance(key, int):
                items = node.value
                nxt = items[key] if 0 <= key < len(items) and not isinstance(items[key], tuple) else None
            else:
                for k, v in node.value:
                    if getattr(k, "value", None) == key:
                        nxt = v
                        break
        node = nxt
        if node is not None:
            line = node.start_mark.line + 1
    return line


def is_manifest(text: str) -> bool:
    """Whether a YAML text is a Kubernetes manifest, a compose file or production-stack Helm values."""
    return bool(
        re.search(r"^(apiVersion|kind)\s*:", text, re.M) and re.search(r"^kind\s*:", text, re.M)
        or re.search(r"^services\s*:", text, re.M)
        or re.search(r"^servingEngineSpec\s*:", text, re.M)
    )


def _is_vllm(image: str, words: list[str]) -> bool:
    joined = " ".join(words)
    return "vllm" in image.lower() or bool(re.search(r"(^|[\s/])vllm(\s+serve|\.entrypoints)", joined))


def _words(command: Any, args: Any, image: str) -> list[str]:
    """The container's argv: command + args, with the vllm-openai image's entry point when only args are given."""
    def as_list(v: Any) -> list[str]:
        if v is None:
            return []
        if isinstance(v, str):
            return shlex.split(v)
        return [str(x) for x in v]

    cmd, arg = as_list(command), as_list(args)
    words = cmd + arg
    # sh -c "vllm serve ...": the script is the last word
    if len(words) >= 3 and words[0].split("/")[-1] in ("sh", "bash") and words[1] == "-c":
        return shlex.split(words[2].replace("\\\n", " "))
    if not cmd and "vllm" in image.lower():
        return ["vllm", "serve", *arg]  # the vllm/vllm-openai image's ENTRYPOINT
    return words


def _env_list(env: Any, notes: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(env, dict):
        return {str(k): str(v) for k, v in env.items() if v is not None}
    for item in env or []:
        if isinstance(item, str) and "=" in item:
            k, v = item.split("=", 1)
            out[k] = v
        elif isinstance(item, dict) and "name" in item:
            if "value" in item:
                out[str(item["name"])] = str(item["value"])
            elif "valueFrom" in item:
                notes.append(f"env {item['name']} comes from valueFrom (a secret or config map): not read")
    return out


def _build(words: list[str], env: dict[str, str], deployment: dict, path: str, line: int | None, version: str | None, lenient: bool, notes: list[str]):
    from oomguard.inputs.launch import parse_command

    argv = [f"{k}={v}" for k, v in env.items() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)] + words
    try:
        launch = parse_command(argv, version=version, lenient=lenient)
    except InputError as exc:
        raise InputError(f"{deployment['kind']} {deployment.get('name') or ''} container {deployment.get('container') or ''}: {exc.message}".replace("  ", " "), file=path, line=line) from None
    launch.path = path
    launch.command_line = line
    for site in launch.sites.values():
        site.file, site.line = path, line
    launch.deployment = deployment
    launch.notes.extend(notes)
    return launch


# --- Kubernetes --------------------------------------------------------------


def _pod_spec(doc: dict) -> tuple[dict | None, tuple]:
    spec = doc.get("spec") or {}
    if doc.get("kind") in ("Pod", "ServingRuntime"):
        return spec, ("spec",)
    tmpl = ((spec.get("template") or {}).get("spec")) if isinstance(spec, dict) else None
    if doc.get("kind") == "Job" and tmpl is None:
        tmpl = (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    return tmpl, ("spec", "template", "spec")


def _k8s(docs, path: str, version: str | None, lenient: bool):
    found = []
    for doc, node in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in WORKLOAD_KINDS:
            continue
        pod, where = _pod_spec(doc)
        if not isinstance(pod, dict):
            continue
        for i, c in enumerate(pod.get("containers") or []):
            if not isinstance(c, dict):
                continue
            image = str(c.get("image") or "")
            words = _words(c.get("command"), c.get("args"), image)
            if _is_vllm(image, words):
                found.append((doc, node, pod, where, i, c, words))
    if not found:
        raise InputError("no vLLM container in this manifest (an image or command with vllm in it)", file=path, line=1)
    doc, node, pod, where, i, c, words = found[0]
    notes: list[str] = []
    if len(found) > 1:
        others = ", ".join(f"{d.get('kind')} {d.get('metadata', {}).get('name')}/{x.get('name')}" for d, _, _, _, _, x, _ in found[1:])
        notes.append(f"several vLLM containers: checked {doc.get('kind')} {doc.get('metadata', {}).get('name')}/{c.get('name')}; not checked: {others}")
    key = "args" if c.get("args") is not None else "command"
    line = _line(node, *where, "containers", i, key)
    limits = (c.get("resources") or {}).get("limits") or {}
    requests = (c.get("resources") or {}).get("requests") or {}
    gpus = limits.get("nvidia.com/gpu", requests.get("nvidia.com/gpu"))
    memory = limits.get("memory")
    mem_bytes = parse_quantity(memory, file=path, line=_line(node, *where, "containers", i, "resources", "limits", "memory")) if memory is not None else None
    shm, shm_source = _k8s_shm(pod, c, mem_bytes, path, node, where)
    deployment = {
        "kind": doc.get("kind"),
        "name": (doc.get("metadata") or {}).get("name"),
        "container": c.get("name"),
        "gpus": int(gpus) if gpus is not None else None,
        "memory_limit_bytes": mem_bytes,
        "shm_bytes": shm,
        "shm_source": shm_source,
    }
    return words, _env_list(c.get("env"), notes), deployment, line, notes


def _k8s_shm(pod: dict, container: dict, mem_bytes: int | None, path: str, node, where) -> tuple[int | None, str]:
    mounts = {m.get("name"): m for m in container.get("volumeMounts") or [] if isinstance(m, dict)}
    shm_mount = next((n for n, m in mounts.items() if str(m.get("mountPath", "")).rstrip("/") == "/dev/shm"), None)
    if shm_mount is None:
        return RUNTIME_SHM_DEFAULT, "no /dev/shm volume: the container runtime's 64 MiB"
    for j, vol in enumerate(pod.get("volumes") or []):
        if isinstance(vol, dict) and vol.get("name") == shm_mount:
            ed = vol.get("emptyDir")
            if isinstance(ed, dict) or ed is None and "emptyDir" in vol:
                ed = ed or {}
                if str(ed.get("medium", "")) != "Memory":
                    return None, "an emptyDir on disk at /dev/shm"
                if ed.get("sizeLimit") is not None:
                    return parse_quantity(ed["sizeLimit"], file=path, line=_line(node, *where, "volumes", j, "emptyDir", "sizeLimit")), "emptyDir medium Memory sizeLimit"
                return mem_bytes, "emptyDir medium Memory without sizeLimit (bounded by the memory limit)"
            return None, f"volume {shm_mount} at /dev/shm"
    return None, f"volume {shm_mount} at /dev/shm (not defined)"


# --- docker-compose ------------------------------------------------------------


def _compose(doc: dict, node, path: str, version: str | None, lenient: bool):
    services = doc.get("services") or {}
    if not isinstance(services, dict):
        raise InputError("services: expected a mapping of service names", file=path, line=_line(node, "services"))
    found = []
    for name, svc in services.items():
        if not isinstance(svc, dict):
            continue
        image = str(svc.get("image") or "")
        words = _words(svc.get("entrypoint"), svc.get("command"), image) if svc.get("entrypoint") else _words(None, svc.get("command"), image)
        if _is_vllm(image, words):
            found.append((name, svc, words))
    if not found:
        raise InputError("no vLLM service in this compose file (an image or command with vllm in it)", file=path, line=_line(node, "services"))
    name, svc, words = found[0]
    notes = [f"several vLLM services: checked {name}; not checked: {', '.join(n for n, _, _ in found[1:])}"] if len(found) > 1 else []
    line = _line(node, "services", name, "command") or _line(node, "services", name)
    deploy = ((svc.get("deploy") or {}).get("resources")) or {}
    mem = (deploy.get("limits") or {}).get("memory") or svc.get("mem_limit")
    mem_bytes = parse_docker_size(mem, file=path, line=line) if mem is not None else None
    gpus = None
    for dev in ((deploy.get("reservations") or {}).get("devices") or []):
        if isinstance(dev, dict) and ("gpu" in (dev.get("capabilities") or []) or dev.get("driver") == "nvidia"):
            count = dev.get("count")
            gpus = len(dev["device_ids"]) if dev.get("device_ids") else (None if count in (None, "all") else int(count))
    if svc.get("gpus") not in (None, "all"):
        gpus = int(svc["gpus"])
    if str(svc.get("ipc", "")) == "host":
        shm, shm_source = None, "ipc: host (the host's /dev/shm)"
    elif svc.get("shm_size") is not None:
        shm, shm_source = parse_docker_size(svc["shm_size"], file=path, line=_line(node, "services", name, "shm_size")), "shm_size"
    else:
        shm, shm_source = RUNTIME_SHM_DEFAULT, "no shm_size: Docker's 64 MiB"
    deployment = {"kind": "compose service", "name": name, "container": name, "gpus": gpus, "memory_limit_bytes": mem_bytes, "shm_bytes": shm, "shm_source": shm_source}
    return words, _env_list(svc.get("environment"), notes), deployment, line, notes


# --- Helm values (vllm-project/production-stack) -------------------------------

_NOT_FLAGS = {"extraArgs", "v1"}


def _camel_to_flag(key: str) -> str:
    return "--" + re.sub(r"(?<!^)(?=[A-Z])", "-", key).lower()


def _helm(doc: dict, node, path: str, version: str | None, lenient: bool):
    spec = doc.get("servingEngineSpec") or {}
    models = spec.get("modelSpec") or []
    if not isinstance(models, list) or not models or not isinstance(models[0], dict):
        raise InputError("servingEngineSpec.modelSpec: expected a list of models", file=path, line=_line(node, "servingEngineSpec"))
    m = models[0]
    notes = [f"several models: checked {m.get('name')}; not checked: {', '.join(str(x.get('name')) for x in models[1:] if isinstance(x, dict))}"] if len(models) > 1 else []
    line = _line(node, "servingEngineSpec", "modelSpec", 0, "vllmConfig") or _line(node, "servingEngineSpec", "modelSpec", 0)
    if not m.get("modelURL"):
        raise InputError("modelSpec has no modelURL", file=path, line=_line(node, "servingEngineSpec", "modelSpec", 0))
    words = ["vllm", "serve", str(m["modelURL"])]
    cfg = m.get("vllmConfig") or {}
    env = _env_list(m.get("env"), notes)
    if "v1" in cfg:
        env["VLLM_USE_V1"] = str(int(bool(cfg["v1"])))
    for key, value in cfg.items():
        if key in _NOT_FLAGS or value is None:
            continue
        flag = _camel_to_flag(str(key))
        if value is True:
            words.append(flag)
        elif value is False:
            words.append("--no-" + flag[2:])
        else:
            words += [flag, str(value)]
    words += [str(x) for x in cfg.get("extraArgs") or []]
    lm = m.get("lmcacheConfig") or {}
    if lm.get("enabled"):
        words += ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
        if lm.get("cpuOffloadingBufferSize") is not None:
            env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = str(lm["cpuOffloadingBufferSize"])
    mem = m.get("limitMemory") or m.get("requestMemory")
    mem_bytes = parse_quantity(mem, file=path, line=line) if mem is not None else None
    shm_size = m.get("shmSize")
    shm = parse_quantity(shm_size, file=path, line=line) if shm_size is not None else None
    deployment = {
        "kind": "production-stack modelSpec",
        "name": m.get("name"),
        "container": m.get("name"),
        "gpus": int(m["requestGPU"]) if m.get("requestGPU") is not None else None,
        "memory_limit_bytes": mem_bytes,
        "shm_bytes": shm,
        "shm_source": "shmSize" if shm is not None else "not set in the values (the chart's default)",
    }
    return words, env, deployment, line, notes


def _parts(path: str, text: str):
    docs = _load_all(text, path)
    if not docs:
        raise InputError("empty YAML document", file=path, line=1)
    if any(isinstance(d, dict) and d.get("kind") for d, _ in docs):
        return _k8s(docs, path, None, False)
    doc, node = docs[0]
    if isinstance(doc, dict) and "services" in doc:
        return _compose(doc, node, path, None, False)
    if isinstance(doc, dict) and "servingEngineSpec" in doc:
        return _helm(doc, node, path, None, False)
    raise InputError("not a Kubernetes manifest, compose file or production-stack values file", file=path, line=1)


def manifest_command(path: str | Path, text: str) -> tuple[list[str], dict, int | None, list[str]]:
    """(argv with ``VAR=value`` words first, deployment, line of the command, notes) of the vLLM container."""
    words, env, deployment, line, notes = _parts(str(path), text)
    argv = [f"{k}={v}" for k, v in env.items() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)] + list(words)
    return argv, deployment, line, notes


def read_manifest(path: str | Path, text: str, *, version: str | None = None, lenient: bool = False):
    """The ``Launch`` of the vLLM container in a manifest, compose file or Helm values (``InputError`` otherwise)."""
    words, env, deployment, line, notes = _parts(str(path), text)
    return _build(words, env, deployment, str(path), line, version, lenient, notes)


def deployment_gib(deployment: dict | None) -> str:
    """One line for reports: what the deployment gives the server."""
    if not deployment:
        return ""
    parts = []
    if deployment.get("gpus") is not None:
        parts.append(f"{deployment['gpus']} GPU(s)")
    if deployment.get("memory_limit_bytes") is not None:
        parts.append(f"memory limit {deployment['memory_limit_bytes'] / GiB:.1f} GiB")
    if deployment.get("shm_bytes") is not None:
        parts.append(f"/dev/shm {deployment['shm_bytes'] / GiB:.2f} GiB ({deployment['shm_source']})")
    return ", ".join(parts)
