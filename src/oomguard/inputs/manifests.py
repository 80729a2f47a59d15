"""Launches as operators write them at scale: Kubernetes objects, compose services, Helm values.

Each vLLM container / service / modelSpec becomes the same ``Launch`` a script gives
(the command parser, ``oomguard.inputs.command``, reads its words), one launch per
server, with the deployment's own facts in ``launch.deployment`` and the source of
every value in the manifest (file, line, column and YAML key path):

- Kubernetes: ``Pod``, ``Deployment``, ``StatefulSet``, ``DaemonSet``, ``ReplicaSet``,
  ``ReplicationController``, ``Job``, ``CronJob``, ``PodTemplate``, ``kind: List``
  (its items), KServe ``InferenceService`` (``predictor.containers`` or
  ``predictor.model`` with the Hugging Face runtime, which runs vLLM) and
  ``ServingRuntime`` / ``ClusterServingRuntime``, and ``LeaderWorkerSet`` (the
  leader's pod; ``size`` pods per group). The container's ``command`` + ``args``
  (with Kubernetes' ``$(VAR)`` expansion from its ``env``; ``sh -c "vllm serve
  $MODEL ..."`` is read as the script it is), ``env``, ``resources``
  (``nvidia.com/gpu`` / ``amd.com/gpu``, the memory limit) and the ``/dev/shm``
  volume (an ``emptyDir`` with ``medium: Memory`` and its ``sizeLimit``; none:
  the runtime's 64 MiB).
- docker compose: every vLLM service's ``entrypoint`` / ``command``, its
  ``environment`` (as the launch's environment), ``deploy.resources`` (memory
  limit, GPU device requests) or ``gpus:`` (``all`` or a list of device requests),
  ``mem_limit``, ``shm_size`` / ``ipc: host``.
- Helm values of vllm-project/production-stack: EVERY
  ``servingEngineSpec.modelSpec[]`` entry, read the way the chart's
  ``deployment-vllm-multi.yaml`` template renders it (``modelURL``, the
  ``vllmConfig`` keys the template knows, ``extraArgs``, ``enableLoRA``,
  ``enableTool`` / ``toolCallParser``, ``lmcacheConfig``, ``env``,
  ``requestGPU``, ``limitMemory``, ``shmSize`` — the chart mounts a 20Gi
  ``/dev/shm`` by default, only with ``tensorParallelSize`` —, and the image
  ``repository:tag``).

The image tag names the vLLM release when the user gives none (``vllm/vllm-openai:
v0.11.0`` -> 0.11.0). ``launch.carrier`` tells ``check --fix`` where each word lives
so that the fix is written back into the manifest itself. Any wrong type is one
``InputError`` naming the file, line and field.
"""

from __future__ import annotations

import re
from typing import Any

from oomguard.errors import InputError
from oomguard.inputs.command import (
    find_vllm,
    ignore_directives,
    keep_env,
    parse_flag_words,
    resolve_version,
)
from oomguard.inputs.launch import EnvFrom, FlagSite, Launch, Source
from oomguard.inputs.shell import Command, Word, lex
from oomguard.inputs.yamlnodes import Nodes, parse_docker_size, parse_quantity
from oomguard.records import field, record
from oomguard.units import GiB, MiB

__all__ = ["is_manifest", "read_manifests", "parse_quantity", "parse_docker_size", "deployment_gib"]

RUNTIME_SHM_DEFAULT = 64 * MiB  # Docker's and containerd's /dev/shm without a volume
HELM_SHM_DEFAULT = "20Gi"  # production-stack's shm emptyDir sizeLimit without shmSize
_POD_SPEC = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
    "ServingRuntime": ("spec",),
    "ClusterServingRuntime": ("spec",),
    "LeaderWorkerSet": ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec"),
}
_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
_SHELLS = {"sh", "bash", "dash", "zsh", "ash", "ksh"}
_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
# KServe's Hugging Face runtime options (the rest of its arguments go to vLLM)
_KSERVE_OWN = {"--model_name", "--model-name", "--model_id", "--model-id", "--model_dir", "--model-dir", "--backend",
               "--task", "--model_revision", "--tokenizer_revision", "--return_probabilities", "--disable_lower_case",
               "--disable_special_tokens", "--return_token_type_ids", "--return_raw_logits", "--max_length",
               "--http_port", "--grpc_port", "--workers", "--predictor_host", "--enable_docs_url"}
# The production-stack template's vllmConfig keys and the flag each becomes (deployment-vllm-multi.yaml).
HELM_KEYS = {
    "maxModelLen": "--max-model-len",
    "dtype": "--dtype",
    "tensorParallelSize": "--tensor-parallel-size",
    "maxNumSeqs": "--max-num-seqs",
    "gpuMemoryUtilization": "--gpu-memory-utilization",
    "maxLoras": "--max-loras",
}
HELM_SWITCHES = {"enableChunkedPrefill": "enable-chunked-prefill", "enablePrefixCaching": "enable-prefix-caching"}
_HELM_NOT_FLAGS = {"extraArgs", "v0", "v1", "prometheusMultiprocDir"}


# --------------------------------------------------------------------- where words live (for check --fix)


@record
class NodeWord(Word):
    """A word of a manifest: its YAML node (None for words the template adds) and key path."""

    key: str | None = None
    node: Any = None


@record
class ArgsCarrier:
    """The vLLM words are items of YAML lists (``command`` / ``args`` / ``extraArgs``)."""

    seqs: list  # the sequence nodes holding the words
    append_to: Any = None  # the sequence new flags go to (None: create ``create_key`` in ``parent``)
    parent: Any = None
    create_key: str = "args"


@record
class ScriptCarrier:
    """The vLLM command is one YAML scalar: a shell script (``sh -c``) or a command string.
    ``node`` is None when the words cannot be written back in place (a script inside a string
    command, or one whose ``$(VAR)`` references were expanded)."""

    node: Any
    value: str  # the scalar's value; the words' offsets index it


@record
class HelmCarrier:
    """A production-stack modelSpec: the chart's vllmConfig keys, and extraArgs for the rest."""

    model_spec: Any
    vllm_config: Any
    extra_args: ArgsCarrier
    keys: dict = field(default_factory=dict)  # flag dest -> (vllmConfig key, key node, value node)


@record
class EnvCarrier:
    style: str  # "k8s" | "compose-list" | "compose-map" | "helm"
    node: Any  # the env list / mapping (None: create it in ``parent``)
    parent: Any
    entries: dict = field(default_factory=dict)  # name -> (entry node, value node)


@record
class ShmCarrier:
    """Where the manifest sizes /dev/shm (``check --fix`` writes OG405's size there).

    Kubernetes: the container (``parent``) and its pod spec (``pod``); the /dev/shm mount's memory
    ``emptyDir`` and its ``sizeLimit`` node when there is one, else the ``volumeMounts`` / ``volumes``
    lists to add one to (None: absent) and the volume names taken. Compose: the service (``parent``)
    and its ``shm_size`` node (``size``). Helm: the modelSpec (``parent``) and its ``shmSize``."""

    style: str  # "k8s" | "compose" | "helm"
    parent: Any
    size: Any = None
    pod: Any = None
    empty_dir: Any = None
    mounts: Any = None
    volumes: Any = None
    names: tuple[str, ...] = ()


@record
class ManifestCarrier:
    format: str  # "kubernetes" | "compose" | "helm"
    flags: Any  # ArgsCarrier | ScriptCarrier | HelmCarrier
    env: EnvCarrier | None = None
    shm: ShmCarrier | None = None  # None: /dev/shm is not the manifest's to size (ipc: host, a volume of another kind)


# --------------------------------------------------------------------- detection


def is_manifest(text: str) -> bool:
    """Whether a YAML text is a Kubernetes object, a compose file or production-stack Helm values."""
    return bool(
        re.search(r"^(apiVersion|kind)\s*:", text, re.M) and re.search(r"^kind\s*:", text, re.M)
        or re.search(r"^services\s*:", text, re.M)
        or re.search(r"^servingEngineSpec\s*:", text, re.M)
    )


def _is_vllm_image(image: str | None) -> bool:
    return bool(image) and "vllm" in image.lower()


def _mentions_vllm(texts: list[str]) -> bool:
    joined = " ".join(texts)
    return bool(re.search(r"(^|[\s/;&|(])vllm(\s+serve|\s*$|\s)|vllm\.entrypoints|vllm[-/]openai", joined))


# --------------------------------------------------------------------- building one launch


class _Builder:
    """Turns the words, env and resources of one container into a ``Launch``."""

    def __init__(self, nodes: Nodes, text: str, path: str, fmt: str, version: str | None, lenient: bool):
        self.n = nodes
        self.text = text
        self.path = path
        self.fmt = fmt
        self.version = version
        self.lenient = lenient

    def word(self, node: Any, key: str, text: str | None = None) -> NodeWord:
        value = self.n.text(node, key) if text is None else text
        return NodeWord(value, value, self.n.line(node) or 0, node.start_mark.index, node.end_mark.index,
                        column=self.n.column(node) or 0, key=key, node=node)

    def synthetic(self, text: str, *, near: Any = None, key: str | None = None) -> NodeWord:
        """A word the template or the image adds (not in the file; not editable)."""
        return NodeWord(text, text, self.n.line(near) or 0, -1, -1, column=0, key=key, node=None)

    def launch(self, *, name: str, image: str | None, image_node: Any, words: list[NodeWord], env: dict[str, tuple[str, Any, str]],
               deployment: dict, carrier: ManifestCarrier, command_node: Any, notes: list[str],
               shell_env: dict[str, str] | None = None, image_key: str | None = None,
               env_from: dict[str, EnvFrom] | None = None) -> Launch:
        launch = Launch("manifest", self.path, None, text=self.text, lenient=self.lenient)
        launch.env_from = dict(env_from or {})
        launch.name = name
        launch.image = image
        launch.deployment = {**deployment, "format": self.fmt, "line": self.n.line(command_node)}
        launch.command_line = self.n.line(command_node)
        launch.notes.extend(notes)
        for k, (v, node, key) in env.items():
            if keep_env(launch, k, v):
                launch.env[k] = v
                launch.env_sites[k] = FlagSite(k, self.path, self.n.line(node), column=self.n.column(node), yaml_path=key, origin=self.fmt)
        # sh -c "vllm serve ...": the script is one word; read it as a script
        script = _script_word(words)
        if script is not None:
            idx, sw = script
            k8s_env = {k: v for k, (v, _n, _k) in env.items()}
            # the script as written (kubelet's $(VAR) expansion is applied to its words below, so
            # that their offsets still index the scalar check --fix rewrites)
            raw = sw.node.value if sw.node is not None and self.fmt == "kubernetes" else sw.text
            inner = lex(raw, path=self.path, env={**(shell_env or {}), **k8s_env})
            if raw is not sw.text:
                for c in inner.commands:
                    for w in c.words:
                        if "$(" in w.text:
                            w.text, _missing = _expand_k8s(w.text, k8s_env)
                            w.unresolved = tuple(u for u in w.unresolved
                                                 if not (u.startswith("$(") and u[2:-1] in k8s_env))
            cmd, start = None, 0
            for c in inner.commands:
                found = find_vllm(c.words)
                if found is not None:
                    cmd, (start, launch.program, img) = c, found
                    launch.image = launch.image or img
                    break
            if cmd is None:
                raise InputError(f"{name}: the `{' '.join(w.text for w in words[:idx])}` script runs no vLLM command",
                                 file=self.path, line=sw.line or None)
            _shift_inner(cmd, sw, self.n)
            carrier = ManifestCarrier(carrier.format, ScriptCarrier(sw.node, raw), carrier.env, carrier.shm)
            for k, v in {**inner.variables, **cmd.assignments}.items():
                if k in launch.env or k in launch.secret_env:
                    continue  # the container's own env entry wins
                if keep_env(launch, k, v):
                    launch.env[k] = v
            flag_words = cmd.words[start:]
            launch.command = cmd
            launch.flag_start = start
            ignore_directives(raw, launch, line_offset=(cmd.words[0].line - 1) if cmd.words else 0)
        else:
            found = find_vllm(words)
            if found is None:
                raise InputError(f"{name}: no vLLM command in {' '.join(w.text for w in words[:6])!r}"
                                 + ("…" if len(words) > 6 else ""), file=self.path, line=self.n.line(command_node))
            start, launch.program, img = found
            launch.image = launch.image or img
            for w in words[:start]:
                if "=" in w.text and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w.text):
                    k, _, v = w.text.partition("=")
                    if keep_env(launch, k, v):
                        launch.env[k] = v
                        launch.env_sites[k] = FlagSite(k, self.path, w.line or None, column=w.column or None, yaml_path=w.key, origin=self.fmt)
            flag_words = words[start:]
            launch.command = Command(list(words), self.n.line(command_node) or 1, {})
            launch.flag_start = start
        launch.carrier = carrier
        release = resolve_version(launch, self.version,
                                  source=Source(self.fmt, self.path, self.n.line(image_node), self.n.column(image_node),
                                                image_key) if image_node is not None else None)
        try:
            parse_flag_words(flag_words, launch, release=release, file=self.path,
                             allow_positional_model=not launch.program.startswith("python -m vllm.entrypoints.openai"),
                             origin=self.fmt)
        except InputError as exc:
            raise InputError(f"{name}: {exc.message}", file=exc.file or self.path, line=exc.line) from None
        return launch


def _script_word(words: list[NodeWord]) -> tuple[int, NodeWord] | None:
    """``sh -c SCRIPT`` (``bash -lc``, ``/bin/sh -ec``...) among a container's words: (index, the script word)."""
    for i, w in enumerate(words):
        base = w.text.rsplit("/", 1)[-1]
        if base in _SHELLS:
            j = i + 1
            while j < len(words) and words[j].text.startswith("-") and not words[j].text.startswith("--"):
                if "c" in words[j].text[1:]:
                    return (j + 1, words[j + 1]) if j + 1 < len(words) else None
                j += 1
            return None
        if base not in ("exec", "env", "nohup", "tini", "dumb-init", "--") and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w.text):
            return None
    return None


def _shift_inner(cmd: Command, sw: NodeWord, n: Nodes) -> None:
    """Lines of a script held in one YAML scalar, in the manifest's terms (offsets stay the script's)."""
    node = sw.node
    block = node is not None and getattr(node, "style", None) in ("|", ">")
    base = (n.line(node) or 1) + (1 if block else 0) - 1
    for w in cmd.words:
        w.line = base + (w.line or 1)
        if not block and node is not None:
            w.column = (n.column(node) or 0) + (w.column or 0) + (1 if node.style in ("'", '"') else 0) - 1
        w.key = sw.key  # type: ignore[attr-defined]
    cmd.line = base + (cmd.line or 1)


def _expand_k8s(text: str, env: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """Kubernetes' ``$(VAR)`` expansion in command/args: defined variables replaced, ``$$`` -> ``$``."""
    missing: list[str] = []

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name in env:
            return env[name]
        missing.append(f"$({name})")
        return m.group(0)

    if "$" not in text:
        return text, ()
    return _K8S_VAR.sub(sub, text), tuple(missing)


def _env_values(n: Nodes, node: Any, where: str, notes: list[str],
                env_from: dict[str, EnvFrom] | None = None) -> tuple[dict[str, tuple[str, Any, str]], dict]:
    """A Kubernetes / Helm ``env`` list: name -> (value, value node, key path); and the carrier entries.
    An entry set by ``valueFrom`` goes to ``env_from`` (set, its value not known here)."""
    out: dict[str, tuple[str, Any, str]] = {}
    entries: dict = {}
    for i, item in enumerate(n.seq(node, where)):
        at = f"{where}[{i}]"
        name = n.text(n.get(item, "name", at), f"{at}.name")
        if not name:
            raise n.error(item, at, "an env entry needs a name")
        vnode = n.get(item, "value", at)
        ref = n.get(item, "valueFrom", at)
        if ref is not None and not n.is_null(ref):
            found = _value_from(n, ref, f"{at}.valueFrom")
            notes.append(f"env {name} is set from {found.source} (taken as set, with a value not known here)")
            if env_from is not None:
                env_from[name] = found
            continue
        value = n.text(vnode, f"{at}.value") if vnode is not None else ""
        out[name] = (value or "", vnode if vnode is not None else item, f"{at}.value")
        entries[name] = (item, vnode)
    return out, entries


# valueFrom's sources (core/v1 EnvVarSource) and how a note names each.
_KEY_REFS = (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap"))
_FIELD_REFS = (("fieldRef", "fieldPath", "the pod field"), ("resourceFieldRef", "resource", "the container resource"))


def _shown(text: str | None) -> str:
    """A name from the manifest as a note shows it: printable, bounded."""
    text = "?" if not text else text
    return "".join(c if c.isprintable() else "?" for c in text[:80])


def _plain(n: Nodes, node: Any, where: str, depth: int = 0) -> Any:
    """A small YAML subtree as plain data (the ``valueFrom`` an export writes back)."""
    if depth > 6:
        raise n.error(node, where, "nested too deep for an env source")
    if n.is_map(node):
        return {k: _plain(n, v, f"{where}.{k}", depth + 1) for k, _kn, v in n.pairs(node, where)[:32]}
    if n.is_seq(node):
        return [_plain(n, v, f"{where}[{i}]", depth + 1) for i, v in enumerate(n.seq(node, where)[:32])]
    value = n.value(node, where)
    return value if isinstance(value, (str, bool, int, float)) or value is None else n.text(node, where)


def _value_from(n: Nodes, node: Any, where: str) -> EnvFrom:
    if not n.is_map(node):
        raise n.error(node, where, "expected a mapping (secretKeyRef, configMapKeyRef, fieldRef or resourceFieldRef)")
    spec = _plain(n, node, where)
    for key, what in _KEY_REFS:
        ref = n.get(node, key, where)
        if ref is not None and n.is_map(ref):
            name = n.text(n.get(ref, "name", f"{where}.{key}"), f"{where}.{key}.name")
            k = n.text(n.get(ref, "key", f"{where}.{key}"), f"{where}.{key}.key")
            return EnvFrom(f"{what} {_shown(name)} key {_shown(k)}", spec, n.line(node))
    for key, field_key, what in _FIELD_REFS:
        ref = n.get(node, key, where)
        if ref is not None and n.is_map(ref):
            return EnvFrom(f"{what} {_shown(n.text(n.get(ref, field_key, where), f'{where}.{key}.{field_key}'))}",
                           spec, n.line(node))
    return EnvFrom("a valueFrom source", spec, n.line(node))


# --------------------------------------------------------------------- Kubernetes


def _k8s_objects(n: Nodes, node: Any, where: str, depth: int = 0):
    """(object node, key path) of every object in a document, items of ``kind: List`` included."""
    if not n.is_map(node):
        return
    kind = n.text(n.get(node, "kind", where), f"{where}.kind".strip(".")) if n.get(node, "kind", where) is not None else None
    if kind is not None and kind.endswith("List") and n.get(node, "items", where) is not None and depth < 4:
        for i, item in enumerate(n.seq(n.get(node, "items", where), f"{where}items".strip("."))):
            yield from _k8s_objects(n, item, f"{where}items[{i}].", depth + 1)
        return
    yield node, where


def _k8s(n: Nodes, b: _Builder, docs: list) -> list[Launch]:
    launches: list[Launch] = []
    seen_kinds: list[str] = []
    for d, doc in enumerate(docs):
        for obj, prefix in _k8s_objects(n, doc, ""):
            kind_node = n.get(obj, "kind", prefix.rstrip("."))
            kind = n.text(kind_node, f"{prefix}kind") if kind_node is not None else None
            if not kind:
                continue
            seen_kinds.append(kind)
            meta = n.get(obj, "metadata", prefix)
            obj_name = n.text(n.get(meta, "name", f"{prefix}metadata"), f"{prefix}metadata.name") if n.is_map(meta) else None
            for cont, pod, where, extra in _containers(n, obj, kind, prefix):
                launch = _k8s_container(n, b, kind, obj_name, cont, pod, where, extra)
                if launch is not None:
                    launches.append(launch)
    if not launches:
        shown = ", ".join(sorted(set(seen_kinds))[:6]) or "no objects"
        raise InputError(f"no vLLM container in this manifest ({shown}; expected an image or a command with vllm in it)",
                         file=b.path, line=1)
    return launches


def _containers(n: Nodes, obj: Any, kind: str, prefix: str):
    """(container node, pod spec node, key path, extra facts) of a workload's containers."""
    if kind == "InferenceService":
        pred = n.path(obj, ("spec", "predictor"), prefix)
        where = f"{prefix}spec.predictor"
        if pred is None:
            return
        model = n.get(pred, "model", where)
        if model is not None:
            yield model, pred, f"{where}.model", {"kserve": True}
        for i, c in enumerate(n.seq(n.get(pred, "containers", where), f"{where}.containers")):
            yield c, pred, f"{where}.containers[{i}]", {}
        return
    path = _POD_SPEC.get(kind)
    if path is None:
        return
    pod = n.path(obj, path, prefix)
    if pod is None and kind == "LeaderWorkerSet":  # without a leaderTemplate the leader runs the worker template
        path = ("spec", "leaderWorkerTemplate", "workerTemplate", "spec")
        pod = n.path(obj, path, prefix)
    where = prefix + ".".join(path)
    if pod is None:
        return
    extra: dict = {}
    if kind == "LeaderWorkerSet":
        size = n.integer(n.path(obj, ("spec", "leaderWorkerTemplate", "size"), prefix), f"{prefix}spec.leaderWorkerTemplate.size",
                         minimum=1, maximum=1 << 16)
        extra["group_size"] = size or 1
    for i, c in enumerate(n.seq(n.get(pod, "containers", where), f"{where}.containers")):
        yield c, pod, f"{where}.containers[{i}]", extra


def _k8s_container(n: Nodes, b: _Builder, kind: str, obj_name: str | None, c: Any, pod: Any, where: str, extra: dict) -> Launch | None:
    if not n.is_map(c):
        raise n.error(c, where, "expected a container (a mapping)")
    image_node = n.get(c, "image", where)
    image = n.text(image_node, f"{where}.image")
    cname = n.text(n.get(c, "name", where), f"{where}.name") or ("model" if extra.get("kserve") else None)
    notes: list[str] = []
    env_from: dict[str, EnvFrom] = {}
    env, entries = _env_values(n, n.get(c, "env", where), f"{where}.env", notes, env_from)
    if n.get(c, "envFrom", where) is not None:
        notes.append(f"{cname or 'the container'} reads variables from envFrom (config maps / secrets): not read")
    env_plain = {k: v for k, (v, _node, _key) in env.items()}
    cmd_node, args_node = n.get(c, "command", where), n.get(c, "args", where)
    for key, node in (("command", cmd_node), ("args", args_node)):
        if node is not None and not n.is_seq(node) and not n.is_null(node):
            raise n.error(node, f"{where}.{key}", "expected a list of strings (Kubernetes does not split a string)")
    words: list[NodeWord] = []
    for key, node in (("command", cmd_node), ("args", args_node)):
        for i, item in enumerate(n.strings(node, f"{where}.{key}")):
            text, missing = _expand_k8s(n.text(item, f"{where}.{key}[{i}]"), env_plain)
            w = b.word(item, f"{where}.{key}[{i}]", text)
            w.unresolved = missing
            words.append(w)
    kserve = extra.get("kserve")
    fmt_name = n.text(n.path(c, ("modelFormat", "name"), where), f"{where}.modelFormat.name") if kserve else None
    texts = [w.text for w in words]
    is_vllm = _is_vllm_image(image) or _mentions_vllm(texts) or (kserve and (fmt_name or "").lower() == "huggingface"
                                                                 and "--backend=huggingface" not in texts)
    if not is_vllm:
        return None
    if kserve and not _mentions_vllm(texts):
        words = _kserve_words(n, b, c, where, words, notes)
    elif cmd_node is None and (_is_vllm_image(image) or kind in ("ServingRuntime", "ClusterServingRuntime")) and not _mentions_vllm(texts[:2]):
        # the vllm/vllm-openai image's ENTRYPOINT
        words = [b.synthetic("vllm", near=args_node or c), b.synthetic("serve", near=args_node or c)] + words
    seqs = [x for x in (cmd_node, args_node) if n.is_seq(x)]
    flags_carrier = ArgsCarrier(seqs, append_to=args_node if n.is_seq(args_node) else (cmd_node if n.is_seq(cmd_node) else None),
                                parent=c, create_key="args")
    env_carrier = EnvCarrier("k8s", n.get(c, "env", where), c, entries)
    limits = n.path(c, ("resources", "limits"), where)
    requests = n.path(c, ("resources", "requests"), where)
    gpus = None
    for res in _GPU_RESOURCES:
        for section, sname in ((limits, "limits"), (requests, "requests")):
            node = n.get(section, res, f"{where}.resources.{sname}") if section is not None else None
            if node is not None and gpus is None:
                gpus = n.integer(node, f"{where}.resources.{sname}.{res}", minimum=0, maximum=1 << 16)
    mem_node = n.get(limits, "memory", f"{where}.resources.limits") if limits is not None else None
    mem_bytes = n.quantity(mem_node, f"{where}.resources.limits.memory")
    shm, shm_source, shm_site = _k8s_shm(n, pod, c, mem_bytes, where)
    name = f"{kind} {obj_name or '?'}" + (f"/{cname}" if cname else "")
    deployment = {"kind": kind, "name": obj_name, "container": cname, "gpus": gpus, "memory_limit_bytes": mem_bytes,
                  "shm_bytes": shm, "shm_source": shm_source}
    node = _pod_node(n, pod, where) if pod is not None else None
    if node:
        deployment["node"] = node  # pods pinned to one node share its GPUs when they name the same devices (plan/shared_gpu.py)
    if extra.get("group_size", 1) > 1:
        deployment["pods"] = extra["group_size"]
        notes.append(f"LeaderWorkerSet of {extra['group_size']} pods per group: the leader's container is read; "
                     f"{gpus or '?'} GPU(s) per pod")
    command_node = args_node if args_node is not None else (cmd_node if cmd_node is not None else c)
    return b.launch(name=name, image=image, image_node=image_node, words=words, env=env, deployment=deployment,
                    carrier=ManifestCarrier("kubernetes", flags_carrier, env_carrier, shm_site), command_node=command_node,
                    notes=notes, shell_env=env_plain, image_key=f"{where}.image", env_from=env_from)


def _kserve_words(n: Nodes, b: _Builder, c: Any, where: str, words: list[NodeWord], notes: list[str]) -> list[NodeWord]:
    """KServe's Hugging Face runtime: its own options out, ``--model_id`` (or the storage URI) as the model."""
    model = None
    kept: list[NodeWord] = []
    i = 0
    while i < len(words):
        w = words[i]
        opt, eq, val = w.text.partition("=")
        if opt in _KSERVE_OWN:
            takes_next = not eq and i + 1 < len(words) and not words[i + 1].text.startswith("-")
            value = val if eq else (words[i + 1].text if takes_next else "")
            if opt.lstrip("-").replace("-", "_") == "model_id":
                model = NodeWord(value, value, w.line, -1, -1, column=w.column, key=w.key, node=None)
            i += 2 if takes_next else 1
            continue
        kept.append(w)
        i += 1
    if model is None:
        uri = n.text(n.get(c, "storageUri", where), f"{where}.storageUri")
        model = b.synthetic("/mnt/models", near=c, key=f"{where}.storageUri")
        if uri:
            notes.append(f"KServe downloads {uri} to /mnt/models: the model is read from there")
    notes.append("KServe's Hugging Face runtime: its own options are not vLLM's and are left out")
    return [b.synthetic("vllm", near=c), b.synthetic("serve", near=c), model, *kept]


def _pod_node(n: Nodes, pod: Any, where: str) -> str | None:
    """The node a pod is pinned to: ``nodeName``, or a ``kubernetes.io/hostname`` node selector."""
    if not n.is_map(pod):
        return None
    name = n.get(pod, "nodeName", where)
    if name is not None and n.is_scalar(name):
        return n.text(name, f"{where}.nodeName")
    sel = n.get(pod, "nodeSelector", where)
    if sel is not None and n.is_map(sel):
        host = n.get(sel, "kubernetes.io/hostname", f"{where}.nodeSelector")
        if host is not None and n.is_scalar(host):
            return n.text(host, f"{where}.nodeSelector.kubernetes.io/hostname")
    return None


def _k8s_shm(n: Nodes, pod: Any, container: Any, mem_bytes: int | None, where: str) -> tuple[int | None, str, ShmCarrier | None]:
    """/dev/shm's size in bytes (None: not bounded by the manifest), what says so, and where --fix resizes it."""
    pod_where = where.rsplit(".containers", 1)[0] if ".containers" in where else where
    shm_mount = None
    mounts, volumes = n.get(container, "volumeMounts", where), n.get(pod, "volumes", pod_where) if n.is_map(pod) else None
    for i, m in enumerate(n.seq(mounts, f"{where}.volumeMounts")):
        if not n.is_map(m):
            raise n.error(m, f"{where}.volumeMounts[{i}]", "expected a mapping")
        path = n.text(n.get(m, "mountPath", where), f"{where}.volumeMounts[{i}].mountPath") or ""
        if path.rstrip("/") == "/dev/shm":
            shm_mount = n.text(n.get(m, "name", where), f"{where}.volumeMounts[{i}].name")
    if shm_mount is None:
        names: list[str] = []
        for j, vol in enumerate(n.seq(volumes, f"{pod_where}.volumes")):
            if n.is_map(vol):
                names.append(str(n.text(n.get(vol, "name", pod_where), f"{pod_where}.volumes[{j}].name") or ""))
        site = ShmCarrier("k8s", container, pod=pod, mounts=mounts if n.is_seq(mounts) else None,
                          volumes=volumes if n.is_seq(volumes) else None, names=tuple(names)) if n.is_map(pod) else None
        return RUNTIME_SHM_DEFAULT, "no /dev/shm volume: the container runtime's 64 MiB", site
    for j, vol in enumerate(n.seq(volumes, f"{pod_where}.volumes")):
        if not n.is_map(vol):
            raise n.error(vol, f"{pod_where}.volumes[{j}]", "expected a mapping")
        if n.text(n.get(vol, "name", pod_where), f"{pod_where}.volumes[{j}].name") != shm_mount:
            continue
        ed_key = n.key_node(vol, "emptyDir")
        if ed_key is None:
            return None, f"volume {shm_mount} at /dev/shm", None
        ed = n.get(vol, "emptyDir", pod_where)
        at = f"{pod_where}.volumes[{j}].emptyDir"
        if ed is not None and not n.is_null(ed) and not n.is_map(ed):
            raise n.error(ed, at, "expected a mapping")
        medium = n.text(n.get(ed, "medium", at), f"{at}.medium") if ed is not None and n.is_map(ed) else None
        if medium != "Memory":
            return None, "an emptyDir on disk at /dev/shm", None
        size = n.get(ed, "sizeLimit", at) if n.is_map(ed) else None
        site = ShmCarrier("k8s", container, size=size, pod=pod, empty_dir=ed)
        if size is not None:
            return n.quantity(size, f"{at}.sizeLimit"), "emptyDir medium Memory sizeLimit", site
        return mem_bytes, "emptyDir medium Memory without sizeLimit (bounded by the memory limit)", site
    return None, f"volume {shm_mount} at /dev/shm (not defined)", None


# --------------------------------------------------------------------- compose


_COMPOSE_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _interpolate(text: str) -> tuple[str, tuple[str, ...]]:
    """compose's ``${VAR:-default}`` interpolation with the defaults the file gives (the shell's
    variables are not known here: ``${VAR}`` without a default stays, unresolved)."""
    missing: list[str] = []

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3)
        if op in (":-", "-") and default is not None:
            return default
        missing.append("$" + name)
        return m.group(0)

    if "$" not in text:
        return text, ()
    return _COMPOSE_VAR.sub(sub, text), tuple(missing)


def _compose(n: Nodes, b: _Builder, doc: Any) -> list[Launch]:
    services = n.get(doc, "services", "")
    if services is None or n.is_null(services):
        raise n.error(doc, "services", "expected a mapping of service names")
    launches = []
    for sname, _knode, svc in n.pairs(services, "services"):
        where = f"services.{sname}"
        if n.is_null(svc):
            continue
        if not n.is_map(svc):
            raise n.error(svc, where, "expected a service (a mapping)")
        launch = _compose_service(n, b, sname, svc, where)
        if launch is not None:
            launches.append(launch)
    if not launches:
        raise InputError("no vLLM service in this compose file (an image or command with vllm in it)",
                         file=b.path, line=n.line(services))
    return launches


def _compose_words(n: Nodes, b: _Builder, node: Any, where: str) -> tuple[list[NodeWord], str | None]:
    """A compose ``command`` / ``entrypoint``: a list (one word per item, editable in place) or a string
    (split like a shell; the words' offsets index the string). (words, "list" | "string" | None)."""
    if n.is_null(node):
        return [], None
    if n.is_seq(node):
        out = []
        for i, item in enumerate(n.strings(node, where)):
            text, missing = _interpolate(n.text(item, f"{where}[{i}]"))
            w = b.word(item, f"{where}[{i}]", text)
            w.unresolved = missing
            out.append(w)
        return out, "list"
    value = n.text(node, where) or ""
    script = lex(value, path=b.path)
    words = [wd for c in script.commands for wd in c.words]
    base = n.line(node) or 1
    return [NodeWord(w.text, w.raw, base + w.line - 1, w.start, w.end, w.unresolved, w.quoted,
                     column=w.column, key=where, node=None) for w in words], "string"


def _compose_service(n: Nodes, b: _Builder, sname: str, svc: Any, where: str) -> Launch | None:
    image_node = n.get(svc, "image", where)
    image = n.text(image_node, f"{where}.image")
    image = _interpolate(image)[0] if image else image
    ep_node, cmd_node = n.get(svc, "entrypoint", where), n.get(svc, "command", where)
    ep_words, ep_kind = _compose_words(n, b, ep_node, f"{where}.entrypoint")
    cmd_words, cmd_kind = _compose_words(n, b, cmd_node, f"{where}.command")
    texts = [w.text for w in ep_words + cmd_words]
    if not (_is_vllm_image(image) or _mentions_vllm(texts)):
        return None
    notes: list[str] = []
    env, entries, env_node, style = _compose_env(n, svc, where, notes)
    if ep_kind is None and _is_vllm_image(image) and not _mentions_vllm(texts[:2]):
        ep_words = [b.synthetic("vllm", near=cmd_node or svc), b.synthetic("serve", near=cmd_node or svc)]
    # the words check --fix edits: a string command (ScriptCarrier), else the lists (ArgsCarrier)
    if cmd_kind == "string" or (cmd_kind is None and ep_kind == "string"):
        target = cmd_node if cmd_kind == "string" else ep_node
        flags_carrier: Any = ScriptCarrier(target, n.text(target, where) or "")
        fixed = ep_words if target is cmd_node else []
        for w in fixed:
            w.start = w.end = -1
        if target is cmd_node:
            for w in ep_words:
                w.start = w.end = -1
    else:
        seqs = [x for x in (ep_node, cmd_node) if n.is_seq(x)]
        flags_carrier = ArgsCarrier(seqs, append_to=seqs[-1] if seqs else None, parent=svc, create_key="command")
        if ep_kind == "string":
            for w in ep_words:
                w.start = w.end = -1
    words = ep_words + cmd_words
    deploy = n.path(svc, ("deploy", "resources"), where)
    limits = n.get(deploy, "limits", f"{where}.deploy.resources") if deploy is not None else None
    mem_node = n.get(limits, "memory", f"{where}.deploy.resources.limits") if limits is not None else None
    mem_bytes = n.docker_size(mem_node, f"{where}.deploy.resources.limits.memory")
    if mem_bytes is None:
        mem_bytes = n.docker_size(n.get(svc, "mem_limit", where), f"{where}.mem_limit")
    gpus = _compose_gpus(n, svc, deploy, where)
    device_ids = _compose_device_ids(n, deploy, where)
    ipc = n.text(n.get(svc, "ipc", where), f"{where}.ipc")
    shm_node = n.get(svc, "shm_size", where)
    shm_site = None if ipc == "host" else ShmCarrier("compose", svc, size=shm_node)
    if ipc == "host":
        shm, shm_source = None, "ipc: host (the host's /dev/shm)"
    elif shm_node is not None:
        shm, shm_source = n.docker_size(shm_node, f"{where}.shm_size"), "shm_size"
    else:
        shm, shm_source = RUNTIME_SHM_DEFAULT, "no shm_size: Docker's 64 MiB"
    deployment = {"kind": "compose service", "name": sname, "container": sname, "gpus": gpus, "memory_limit_bytes": mem_bytes,
                  "shm_bytes": shm, "shm_source": shm_source}
    if device_ids:
        deployment["device_ids"] = device_ids  # services naming the same devices share them (plan/shared_gpu.py)
    deps = n.get(svc, "depends_on", where)
    if deps is not None and not n.is_null(deps):
        # the start order of services sharing a GPU (cli/same_gpu.py)
        deployment["depends_on"] = ([str(n.text(x, f"{where}.depends_on")) for x in n.strings(deps, f"{where}.depends_on")]
                                    if n.is_seq(deps) else [str(k) for k, _kn, _vn in n.pairs(deps, f"{where}.depends_on")])
    command_node = cmd_node if cmd_node is not None else (ep_node if ep_node is not None else svc)
    return b.launch(name=f"compose service {sname}", image=image, image_node=image_node, words=words, env=env,
                    deployment=deployment, carrier=ManifestCarrier("compose", flags_carrier, EnvCarrier(style, env_node, svc, entries), shm_site),
                    command_node=command_node, notes=notes, shell_env={k: v for k, (v, _n, _k) in env.items()},
                    image_key=f"{where}.image")


def _compose_env(n: Nodes, svc: Any, where: str, notes: list[str]):
    node = n.get(svc, "environment", where)
    env: dict[str, tuple[str, Any, str]] = {}
    entries: dict = {}
    at = f"{where}.environment"
    if n.is_null(node):
        return env, entries, None, "compose-map"
    if n.is_seq(node):
        for i, item in enumerate(n.strings(node, at)):
            text = n.text(item, f"{at}[{i}]") or ""
            k, eq, v = text.partition("=")
            if not eq:
                notes.append(f"{k}: passed through from the shell that runs compose: not known here")
                continue
            env[k] = (_interpolate(v)[0], item, f"{at}[{i}]")
            entries[k] = (item, item)
        return env, entries, node, "compose-list"
    for k, knode, vnode in n.pairs(node, at):
        if n.is_null(vnode):
            notes.append(f"{k}: passed through from the shell that runs compose: not known here")
            continue
        v = n.text(vnode, f"{at}.{k}")
        env[k] = (_interpolate(v or "")[0], vnode, f"{at}.{k}")
        entries[k] = (knode, vnode)
    return env, entries, node, "compose-map"


def _device_gpus(n: Nodes, dev: Any, at: str) -> tuple[bool, int | None]:
    """(is a GPU request, count) of one compose device request (None count: all GPUs)."""
    if not n.is_map(dev):
        raise n.error(dev, at, "expected a device request (a mapping)")
    caps = []
    for i, cap in enumerate(n.seq(n.get(dev, "capabilities", at), f"{at}.capabilities")):
        if n.is_seq(cap):  # the older [[gpu]] form
            caps += [n.text(x, f"{at}.capabilities[{i}]") for x in n.strings(cap, f"{at}.capabilities[{i}]")]
        else:
            caps.append(n.text(cap, f"{at}.capabilities[{i}]"))
    driver = n.text(n.get(dev, "driver", at), f"{at}.driver")
    if "gpu" not in caps and driver not in ("nvidia", "amd"):
        return False, None
    ids = n.get(dev, "device_ids", at)
    if ids is not None:
        return True, len(n.strings(ids, f"{at}.device_ids"))
    count = n.get(dev, "count", at)
    if count is None or (n.is_scalar(count) and str(n.value(count, f"{at}.count")).lower() in ("all", "-1")):
        return True, None
    return True, n.integer(count, f"{at}.count", minimum=0, maximum=1 << 16)


def _compose_device_ids(n: Nodes, deploy: Any, where: str) -> list[str]:
    """The GPU ``device_ids`` a service reserves (``deploy.resources.reservations.devices``)."""
    reservations = n.get(deploy, "reservations", f"{where}.deploy.resources") if deploy is not None else None
    devices = n.get(reservations, "devices", f"{where}.deploy.resources.reservations") if reservations is not None else None
    ids: list[str] = []
    for i, dev in enumerate(n.seq(devices, f"{where}.deploy.resources.reservations.devices")):
        at = f"{where}.deploy.resources.reservations.devices[{i}]"
        node = n.get(dev, "device_ids", at) if n.is_map(dev) else None
        if node is not None:
            ids += [str(n.text(x, f"{at}.device_ids")) for x in n.strings(node, f"{at}.device_ids")]
    return ids


def _compose_gpus(n: Nodes, svc: Any, deploy: Any, where: str) -> int | None:
    gpus = None
    reservations = n.get(deploy, "reservations", f"{where}.deploy.resources") if deploy is not None else None
    devices = n.get(reservations, "devices", f"{where}.deploy.resources.reservations") if reservations is not None else None
    for i, dev in enumerate(n.seq(devices, f"{where}.deploy.resources.reservations.devices")):
        is_gpu, count = _device_gpus(n, dev, f"{where}.deploy.resources.reservations.devices[{i}]")
        if is_gpu and count is not None:
            gpus = (gpus or 0) + count
    node = n.get(svc, "gpus", where)
    if node is not None and not n.is_null(node):
        if n.is_seq(node):
            total = None
            for i, dev in enumerate(n.seq(node, f"{where}.gpus")):
                _is, count = _device_gpus(n, dev, f"{where}.gpus[{i}]")
                if count is not None:
                    total = (total or 0) + count
            gpus = total if total is not None else gpus
        else:
            v = n.value(node, f"{where}.gpus")
            if str(v).lower() != "all":
                gpus = n.integer(node, f"{where}.gpus", minimum=0, maximum=1 << 16)
    return gpus


# --------------------------------------------------------------------- Helm values (production-stack)


def _helm(n: Nodes, b: _Builder, doc: Any) -> list[Launch]:
    spec = n.get(doc, "servingEngineSpec", "")
    where = "servingEngineSpec.modelSpec"
    models_node = n.get(spec, "modelSpec", "servingEngineSpec") if spec is not None and not n.is_null(spec) else None
    models = n.seq(models_node, where)
    if not models:
        raise n.error(models_node or spec or doc, where, "expected a list of models")
    launches = []
    names: set[str] = set()
    for i, m in enumerate(models):
        at = f"{where}[{i}]"
        if not n.is_map(m):
            raise n.error(m, at, "expected a modelSpec (a mapping)")
        launch = _helm_model(n, b, m, at)
        if launch.name in names:
            launch.name = f"{launch.name}#{i}"
        names.add(launch.name)
        launches.append(launch)
    return launches


def _helm_model(n: Nodes, b: _Builder, m: Any, at: str) -> Launch:
    name = n.text(n.get(m, "name", at), f"{at}.name") or f"model {at}"
    url_node = n.get(m, "modelURL", at)
    url = n.text(url_node, f"{at}.modelURL")
    if not url:
        raise n.error(m, at, "modelSpec has no modelURL")
    repo = n.text(n.get(m, "repository", at), f"{at}.repository")
    tag_node = n.get(m, "tag", at)
    tag = n.text(tag_node, f"{at}.tag")
    image = f"{repo}:{tag}" if repo and tag else None
    notes: list[str] = []
    words: list[NodeWord] = [b.synthetic("vllm", near=m), b.synthetic("serve", near=m), b.word(url_node, f"{at}.modelURL")]
    cfg = n.get(m, "vllmConfig", at)
    cat = f"{at}.vllmConfig"
    keys: dict = {}
    if cfg is not None and not n.is_null(cfg) and not n.is_map(cfg):
        raise n.error(cfg, cat, "expected a mapping")
    for flag_key, option in (("enableLoRA", "--enable-lora"), ("enableTool", "--enable-auto-tool-choice")):
        if n.boolean(n.get(m, flag_key, at), f"{at}.{flag_key}"):
            words.append(b.synthetic(option, near=n.get(m, flag_key, at), key=f"{at}.{flag_key}"))
    parser = n.get(m, "toolCallParser", at)
    if parser is not None and not n.is_null(parser):
        words += [b.synthetic("--tool-call-parser", near=parser), b.word(parser, f"{at}.toolCallParser")]
    seen_prefix = False
    extra_node = None
    extra_words: list = []  # the chart writes extraArgs after every vllmConfig key: a flag there wins
    env_extra: dict[str, tuple[str, Any, str]] = {}
    for key, knode, vnode in (n.pairs(cfg, cat) if n.is_map(cfg) else []):
        kat = f"{cat}.{key}"
        if key in HELM_SWITCHES:
            on = n.boolean(vnode, kat)
            if key == "enableChunkedPrefill" or key == "enablePrefixCaching":
                seen_prefix = seen_prefix or key == "enablePrefixCaching"
                opt = ("--" if on else "--no-") + HELM_SWITCHES[key]
                w = b.synthetic(opt, near=knode, key=kat)
                w.line, w.column = n.line(knode) or 0, n.column(knode) or 0
                words.append(w)
                keys[HELM_SWITCHES[key].replace("-", "_")] = (key, knode, vnode)
        elif key in HELM_KEYS:
            if n.is_null(vnode):
                continue
            opt = b.synthetic(HELM_KEYS[key], near=knode, key=kat)
            opt.line, opt.column = n.line(knode) or 0, n.column(knode) or 0
            words += [opt, b.word(vnode, kat)]
            keys[HELM_KEYS[key][2:].replace("-", "_")] = (key, knode, vnode)
        elif key == "extraArgs":
            extra_node = vnode
            for j, item in enumerate(n.strings(vnode, kat)):
                extra_words.append(b.word(item, f"{kat}[{j}]"))
        elif key == "v0":
            if str(n.value(vnode, kat)) == "1":
                env_extra["VLLM_USE_V1"] = ("0", vnode, kat)
        elif key not in _HELM_NOT_FLAGS:
            notes.append(f"{kat} is not read by the production-stack chart (pass other flags in extraArgs)")
    if not seen_prefix and n.is_map(cfg) and any(True for _ in n.pairs(cfg, cat)):
        # inside `with .vllmConfig` (a non-empty one) the chart writes --no-enable-prefix-caching unless
        # enablePrefixCaching is true, before extraArgs (deployment-vllm-multi.yaml): an
        # --enable-prefix-caching in extraArgs turns it back on, as argparse's last word wins
        words.append(b.synthetic("--no-enable-prefix-caching", near=cfg, key=f"{cat}.enablePrefixCaching"))
    words += extra_words
    lm = n.get(m, "lmcacheConfig", at)
    lat = f"{at}.lmcacheConfig"
    if lm is not None and not n.is_null(lm):
        if not n.is_map(lm):
            raise n.error(lm, lat, "expected a mapping")
        if n.boolean(n.get(lm, "enabled", lat), f"{lat}.enabled"):
            role = n.text(n.get(lm, "kvRole", lat), f"{lat}.kvRole") or "kv_both"
            words += [b.synthetic("--kv-transfer-config", near=lm, key=lat),
                      b.synthetic('{"kv_connector":"LMCacheConnectorV1","kv_role":"%s"}' % role.replace('"', ""), near=lm, key=lat)]
            size_node = n.get(lm, "cpuOffloadingBufferSize", lat)
            if size_node is not None and not n.is_null(size_node):
                size = n.text(size_node, f"{lat}.cpuOffloadingBufferSize") or ""
                try:
                    positive = float(size) > 0
                except ValueError:
                    raise n.error(size_node, f"{lat}.cpuOffloadingBufferSize", f"expected a number of GB, found {size[:40]!r}") from None
                if positive:
                    env_extra["LMCACHE_LOCAL_CPU"] = ("True", size_node, f"{lat}.cpuOffloadingBufferSize")
                    env_extra["LMCACHE_MAX_LOCAL_CPU_SIZE"] = (size, size_node, f"{lat}.cpuOffloadingBufferSize")
    env_from: dict[str, EnvFrom] = {}
    env, entries = _env_values(n, n.get(m, "env", at), f"{at}.env", notes, env_from)
    env = {**env_extra, **env}
    gpu_node = n.get(m, "requestGPU", at)
    gpus = n.integer(gpu_node, f"{at}.requestGPU", minimum=0, maximum=1 << 16)
    mem_bytes = n.quantity(n.get(m, "limitMemory", at), f"{at}.limitMemory")
    if mem_bytes is None and n.get(m, "requestMemory", at) is not None:
        n.quantity(n.get(m, "requestMemory", at), f"{at}.requestMemory")  # validated; a request is not a limit
    shm_site = None
    if "tensor_parallel_size" in keys:
        shm_node = n.get(m, "shmSize", at)
        shm_site = ShmCarrier("helm", m, size=shm_node)  # the chart mounts shmSize only with tensorParallelSize
        shm = n.quantity(shm_node, f"{at}.shmSize") if shm_node is not None else parse_quantity(HELM_SHM_DEFAULT)
        shm_source = "shmSize" if shm_node is not None else f"the chart's default {HELM_SHM_DEFAULT} emptyDir"
    else:
        shm, shm_source = RUNTIME_SHM_DEFAULT, "no tensorParallelSize: the chart mounts no /dev/shm volume (the runtime's 64 MiB)"
    deployment = {"kind": "production-stack modelSpec", "name": name, "container": "vllm", "gpus": gpus,
                  "memory_limit_bytes": mem_bytes, "shm_bytes": shm, "shm_source": shm_source}
    extra_carrier = ArgsCarrier([extra_node] if n.is_seq(extra_node) else [], append_to=extra_node if n.is_seq(extra_node) else None,
                                parent=cfg if n.is_map(cfg) else m, create_key="extraArgs")
    carrier = ManifestCarrier("helm", HelmCarrier(m, cfg if n.is_map(cfg) else None, extra_carrier, keys),
                              EnvCarrier("helm", n.get(m, "env", at), m, entries), shm_site)
    return b.launch(name=f"modelSpec {name}", image=image, image_node=tag_node, words=words, env=env, deployment=deployment,
                    carrier=carrier, command_node=cfg if cfg is not None else m, notes=notes, image_key=f"{at}.tag",
                    env_from=env_from)


# --------------------------------------------------------------------- entry point


def read_manifests(text: str, *, path: str, version: str | None = None, lenient: bool = False) -> list[Launch]:
    """Every vLLM launch in a Kubernetes / compose / production-stack text (``InputError`` otherwise)."""
    from oomguard.inputs.structured import compose_yaml_all

    docs = [d for d in compose_yaml_all(text, file=path) if d is not None]
    n = Nodes(path)
    try:
        docs = [d for d in docs if not n.is_null(d)]
        if not docs:
            raise InputError("empty YAML document", file=path, line=1)
        b = _Builder(n, text, path, "kubernetes", version, lenient)
        if any(n.is_map(d) and n.get(d, "kind") is not None for d in docs):
            launches = _k8s(n, b, docs)
        elif n.is_map(docs[0]) and n.get(docs[0], "services") is not None:
            b.fmt = "compose"
            launches = _compose(n, b, docs[0])
        elif n.is_map(docs[0]) and n.get(docs[0], "servingEngineSpec") is not None:
            b.fmt = "helm"
            launches = _helm(n, b, docs[0])
        else:
            raise InputError("not a Kubernetes manifest, compose file or production-stack values file", file=path, line=1)
    finally:
        n.close()
    for launch in launches:
        ignore_directives(text, launch)
    return launches


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
