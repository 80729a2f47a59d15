"""Generators of hostile launches in every form the one launch reader takes, and the cases that run them.

Kubernetes objects (every kind the reader knows, ``kind: List``, multi-document files), compose
files, production-stack Helm values, ``--config`` YAML with explicit tags, and JSON-valued flags
(``--hf-overrides``, ``--kv-transfer-config``, ``--compilation-config``, ``--speculative-config``)
with values of every wrong type. Each generator starts from a valid launch and mutates it: a
value replaced by one of another type (a list where a count goes, NaN, a 5,000-digit integer, a
date), a key removed or doubled, an explicit YAML tag, an alias bomb. A run is judged like the
other fuzz cases (``fuzzlib.judge``): a documented exit code, no traceback, bounded time and
memory, no planted secret printed. ``reader_cases`` feed the reader directly (cheap: many
examples); ``command_cases`` run plan / check / fit / host / export on the same inputs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from hypothesis import strategies as st

from tests.property import fuzzlib

SECRET = fuzzlib.SECRET_HF
HOST_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "host" / "roots" / "two_numa_4x4090"

# -- values of every type -----------------------------------------------------------------------

_ODD_SCALARS = [
    None, True, False, 0, -1, 1, 2**63, 10**400, 1e308, -1e308, float("nan"), float("inf"), 0.5, "", " ", "x",
    "16Gi", "1e999Gi", "-4Gi", "all", "nan", "٣", "0x10", "1_000", "9" * 400, "$(UNSET)", "$(HF)", "${X:-1}",
    "a\nb", "--max-model-len", "{", "[1,2]", "2024-01-01", "hf_token_" + SECRET,
]
_scalars = st.one_of(st.sampled_from(_ODD_SCALARS), st.integers(-10, 1 << 20), st.text(max_size=12),
                     st.floats(allow_nan=True, allow_infinity=True))
_values = st.recursive(_scalars, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                        st.dictionaries(st.text(max_size=8), kids, max_size=3)),
                       max_leaves=8)

# YAML text spliced in where a value goes: tags, aliases, flow oddities
_YAML_SNIPPETS = [
    "!!int abc", "!!float zz", "!!timestamp 2020-13-45", "!!binary zz=", "!!set {a, b}", "!!omap [a: 1]",
    "!!python/object:os.system x", "!!str 5", "!!null x", "!!int " + "9" * 5000, ".nan", ".inf", "-.inf",
    "1:2:3:4:5", "0o17", "0b101", "~", "[]", "{}", "[[[[[[]]]]]]", "? [a, b]\n  : 1", "*undefined",
    "&a [*a]", "|\n      multi\n      line", ">\n      folded", "'quoted ''x'''", "\"esc\\u0000\\x01\"",
]

_BOMB = ('a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
         'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n')

_GOOD_ARGS = ["Qwen/Qwen3-8B", "--max-model-len", "8192", "--tensor-parallel-size", "1",
              "--gpu-memory-utilization", "0.9", "--max-num-seqs", "16"]
_JSON_FLAGS = ["--hf-overrides", "--kv-transfer-config", "--compilation-config", "--speculative-config"]
# (a secret only where it is one: a bare word may become the model id, which is not secret)
_ARG_WORDS = _GOOD_ARGS + _JSON_FLAGS + ["--api-key=" + fuzzlib.SECRET_API_KEY, "--max-model-len=$(LEN)", "-tp", "2",
                                         "--no-such-flag", "--kv-cache-dtype", "fp8", "--enforce-eager", "2>&1", "|"]


@st.composite
def json_flag_values(draw) -> str:
    """A JSON-valued flag's value: objects whose known fields hold the wrong type, non-objects, NaN."""
    fields = ["rope_scaling", "max_position_embeddings", "text_config", "factor", "original_max_position_embeddings",
              "rope_type", "kv_connector", "kv_role", "kv_connector_extra_config", "cpu_bytes_to_use",
              "num_cpu_blocks", "num_speculative_tokens", "method", "model", "cudagraph_mode",
              "cudagraph_capture_sizes", "max_cudagraph_capture_size", "level", "mode", "password"]
    shape = draw(st.integers(0, 5))
    if shape == 0:
        return draw(st.sampled_from(["[]", "[1,2]", '"str"', "5", "null", "true", "NaN", "Infinity", "1e999",
                                     "{", '{"a": NaN}', "{" * 200, '{"factor": ' + "9" * 5000 + "}"]))
    obj: dict = {}
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(fields))
        obj[key] = draw(_values)
    if shape == 1:  # nest a wrong-typed object under a known nested field
        obj = {draw(st.sampled_from(["rope_scaling", "text_config", "kv_connector_extra_config"])): obj}
    text = json.dumps(obj, allow_nan=True, default=str, ensure_ascii=False)
    if shape == 2:
        text = text.replace("0.5", "NaN", 1).replace("1e+308", "1e999", 1)
    return text


def _splice(draw, doc: dict, paths: list[tuple]) -> dict:
    """Replace the value at one of ``paths`` (or a random place) with a value of any type."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):  # mostly one change: the rest of the launch stays readable
        path = draw(st.sampled_from(paths))
        node = doc
        for key in path[:-1]:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and key < len(node):
                node = node[key]
            else:
                node = None
                break
        if node is None:
            continue
        last = path[-1]
        action = draw(st.integers(0, 3))
        if isinstance(node, dict):
            if action == 0:
                node.pop(last, None)
            else:
                node[last] = draw(_values)
        elif isinstance(node, list) and isinstance(last, int) and last < len(node):
            node[last] = draw(_values)
    return doc


def _dump(draw, doc) -> str:
    import yaml

    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000)
    except Exception:  # noqa: BLE001 - a value PyYAML cannot dump: write it as JSON (also YAML)
        text = json.dumps(doc, default=str)
    if draw(st.integers(0, 4)) == 0:  # a tag or alias snippet where a value went
        lines = text.split("\n")
        i = draw(st.integers(0, max(0, len(lines) - 2)))
        line = lines[i]
        if ": " in line:
            lines[i] = line.split(": ", 1)[0] + ": " + draw(st.sampled_from(_YAML_SNIPPETS))
        text = "\n".join(lines)
    if draw(st.integers(0, 12)) == 0:
        text = _BOMB + text
    return text


def _container(draw) -> dict:
    args = list(_GOOD_ARGS) if draw(st.booleans()) else draw(st.lists(st.sampled_from(_ARG_WORDS), max_size=10))
    if draw(st.integers(0, 3)) == 0:
        args += [draw(st.sampled_from(_JSON_FLAGS)), draw(json_flag_values())]
    c: dict = {"name": "vllm", "image": draw(st.sampled_from(["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:latest",
                                                               "vllm/vllm-openai:v0.33.0", "vllm/vllm-openai:v0.10.1.1",
                                                               "vllm/vllm-openai:v0.5.0", "vllm/vllm-openai:v99.0",
                                                               "registry/x:1", "vllm/vllm-openai@sha256:abc"])),
               "args": args,
               "env": [{"name": "LEN", "value": "8192"}, {"name": "HF_TOKEN", "value": SECRET},
                       {"name": "VLLM_ALLOW_LONG_MAX_MODEL_LEN", "value": "1"}],
               "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "64Gi"}},
               "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}
    if draw(st.integers(0, 3)) == 0:
        c["command"] = ["/bin/sh", "-c"]
        c["args"] = [draw(st.sampled_from([
            "exec vllm serve $(MODEL) --max-model-len $(LEN)", "vllm serve Qwen/Qwen3-8B | tee log",
            "vllm serve 'unterminated", "echo no vllm here", "bash -lc 'vllm serve x --max-num-seqs abc'",
            "vllm serve Qwen/Qwen3-8B --hf-overrides '" + draw(json_flag_values()).replace("'", "") + "'",
        ]))]
    return c


_CONTAINER_PATHS = [("image",), ("args",), ("args", 0), ("args", 2), ("command",), ("env",), ("env", 0),
                    ("env", 0, "value"), ("env", 0, "name"), ("resources",), ("resources", "limits"),
                    ("resources", "limits", "nvidia.com/gpu"), ("resources", "limits", "memory"),
                    ("volumeMounts",), ("volumeMounts", 0), ("volumeMounts", 0, "mountPath"), ("name",), ("envFrom",)]


@st.composite
def kubernetes_texts(draw) -> str:
    """A Kubernetes file: one of every kind the reader knows, mutated; sometimes a List or several documents."""
    kind = draw(st.sampled_from(["Deployment", "StatefulSet", "Pod", "Job", "CronJob", "DaemonSet", "InferenceService",
                                 "ServingRuntime", "LeaderWorkerSet", "List", "Service", "Weird"]))
    c = _container(draw)
    pod = {"containers": [c], "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]}
    if kind == "Pod":
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "p"}, "spec": pod}
        base = ("spec",)
    elif kind == "CronJob":
        obj = {"apiVersion": "batch/v1", "kind": kind, "metadata": {"name": "c"},
               "spec": {"jobTemplate": {"spec": {"template": {"spec": pod}}}}}
        base = ("spec", "jobTemplate", "spec", "template", "spec")
    elif kind == "InferenceService":
        model = {"modelFormat": {"name": "huggingface"}, "args": ["--model_name=x", "--model_id=Qwen/Qwen3-8B",
                                                                  "--max-model-len=8192"],
                 "resources": c["resources"], "env": c["env"], "storageUri": "hf://Qwen/Qwen3-8B"}
        obj = {"apiVersion": "serving.kserve.io/v1beta1", "kind": kind, "metadata": {"name": "i"},
               "spec": {"predictor": {"model": model} if draw(st.booleans()) else {"containers": [c]}}}
        base = ("spec", "predictor")
    elif kind == "ServingRuntime":
        obj = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": kind, "metadata": {"name": "r"}, "spec": pod}
        base = ("spec",)
    elif kind == "LeaderWorkerSet":
        obj = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": kind, "metadata": {"name": "l"},
               "spec": {"leaderWorkerTemplate": {"size": draw(st.sampled_from([2, 0, -1, "x", 10**9])),
                                                 "leaderTemplate": {"spec": pod}, "workerTemplate": {"spec": pod}}}}
        base = ("spec", "leaderWorkerTemplate", "leaderTemplate", "spec")
    else:
        obj = {"apiVersion": "apps/v1", "kind": kind if kind not in ("List", "Weird") else "Deployment",
               "metadata": {"name": "d"}, "spec": {"template": {"spec": pod}}}
        base = ("spec", "template", "spec")
    paths = [base + ("containers", 0) + p for p in _CONTAINER_PATHS] + [base + ("containers",), base + ("volumes",),
             base + ("volumes", 0, "emptyDir"), base + ("volumes", 0, "emptyDir", "sizeLimit"), ("kind",),
             ("metadata",), ("metadata", "name"), ("spec",), base]
    obj = _splice(draw, obj, paths)
    if kind == "List":
        obj = {"apiVersion": "v1", "kind": "List", "items": [obj, draw(_values)] if draw(st.booleans()) else obj}
    if kind == "Weird":
        obj = draw(_values)
    text = _dump(draw, obj)
    if draw(st.integers(0, 3)) == 0:
        text = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n" + text + ("\n---\n" + text if draw(st.booleans()) else "")
    return text


@st.composite
def compose_texts(draw) -> str:
    svc: dict = {"image": draw(st.sampled_from(["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:${TAG:-v0.10.1}",
                                                  "vllm/vllm-openai:v0.33.0", "nginx", "vllm/vllm-openai"]))}
    form = draw(st.integers(0, 3))
    if form == 0:
        svc["command"] = list(_GOOD_ARGS)
    elif form == 1:
        svc["command"] = " ".join(_GOOD_ARGS) + draw(st.sampled_from(["", " 'unterminated", " --hf-overrides '{\"a\": NaN}'"]))
    elif form == 2:
        svc["entrypoint"] = ["/bin/sh", "-c", "vllm serve Qwen/Qwen3-8B --max-num-seqs 8 | tee log"]
    else:
        svc["command"] = draw(st.lists(st.sampled_from(_ARG_WORDS), max_size=10))
    svc["environment"] = (["HF_TOKEN=" + SECRET, "VLLM_LOGGING_LEVEL=INFO", "PASSTHROUGH"] if draw(st.booleans())
                          else {"HF_TOKEN": SECRET, "VLLM_USE_V1": 1, "EMPTY": None})
    svc["deploy"] = {"resources": {"limits": {"memory": "96g"},
                                   "reservations": {"devices": [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]}}}
    svc["gpus"] = draw(st.sampled_from(["all", 2, [{"driver": "nvidia", "count": 2}], [{"capabilities": [["gpu"]], "device_ids": ["0", "1"]}], None]))
    svc["shm_size"] = draw(st.sampled_from(["16g", "16g", "1e9", "lots", 1 << 70, None]))
    paths = [("services", "vllm") + p for p in [("image",), ("command",), ("command", 0), ("entrypoint",), ("environment",),
             ("deploy",), ("deploy", "resources"), ("deploy", "resources", "limits", "memory"),
             ("deploy", "resources", "reservations", "devices"), ("deploy", "resources", "reservations", "devices", 0),
             ("deploy", "resources", "reservations", "devices", 0, "count"), ("gpus",), ("shm_size",), ("mem_limit",),
             ("ipc",)]] + [("services",), ("services", "vllm")]
    doc = _splice(draw, {"services": {"redis": {"image": "redis:7"}, "vllm": svc}}, paths)
    return _dump(draw, doc)


@st.composite
def helm_texts(draw) -> str:
    def spec(name: str) -> dict:
        return {"name": name, "repository": "vllm/vllm-openai", "tag": draw(st.sampled_from(["v0.11.0", "latest", "v0.33.0"])),
                "modelURL": "Qwen/Qwen3-8B", "requestGPU": 1, "requestMemory": "64Gi", "limitMemory": "96Gi",
                "shmSize": "20Gi",
                "vllmConfig": {"maxModelLen": 8192, "tensorParallelSize": 1, "enablePrefixCaching": True,
                               "gpuMemoryUtilization": 0.9, "extraArgs": ["--max-num-seqs", "16"], "v0": 0},
                "lmcacheConfig": {"enabled": True, "cpuOffloadingBufferSize": "20"},
                "env": [{"name": "HF_TOKEN", "value": SECRET}], "hf_token": SECRET}
    keys = [("name",), ("modelURL",), ("requestGPU",), ("limitMemory",), ("shmSize",), ("tag",), ("vllmConfig",),
            ("vllmConfig", "maxModelLen"), ("vllmConfig", "tensorParallelSize"), ("vllmConfig", "enablePrefixCaching"),
            ("vllmConfig", "gpuMemoryUtilization"), ("vllmConfig", "extraArgs"), ("vllmConfig", "extraArgs", 0),
            ("vllmConfig", "dtype"), ("lmcacheConfig",), ("lmcacheConfig", "cpuOffloadingBufferSize"),
            ("lmcacheConfig", "enabled"), ("env",), ("env", 0), ("enableTool",), ("toolCallParser",)]
    paths = [("servingEngineSpec", "modelSpec", i) + k for i in (0, 1) for k in keys] + [
        ("servingEngineSpec",), ("servingEngineSpec", "modelSpec"), ("servingEngineSpec", "modelSpec", 0)]
    doc = _splice(draw, {"servingEngineSpec": {"modelSpec": [spec("a"), spec(draw(st.sampled_from(["b", "a"])))]}}, paths)
    return _dump(draw, doc)


@st.composite
def tagged_configs(draw) -> str:
    """A --config YAML whose values carry explicit tags (or are of the wrong type)."""
    keys = ["max-model-len", "gpu_memory_utilization", "tensor-parallel-size", "max-num-seqs", "kv-cache-dtype",
            "enable-prefix-caching", "cudagraph-capture-sizes", "hf-overrides", "kv-transfer-config",
            "compilation-config", "speculative-config", "served-model-name", "model", "<<", "api-key"]
    lines = ["model: Qwen/Qwen3-8B"]
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(keys))
        value = draw(st.one_of(st.sampled_from(_YAML_SNIPPETS), json_flag_values(),
                               _values.map(lambda v: json.dumps(v, default=str)).filter(lambda s: "\n" not in s)))
        lines.append(f"{key}: {value}")
    if draw(st.booleans()):
        lines.append(f"api-key: {fuzzlib.SECRET_API_KEY}")
    return "\n".join(lines) + "\n"


@st.composite
def json_flag_scripts(draw) -> str:
    flag = draw(st.sampled_from(_JSON_FLAGS))
    value = draw(json_flag_values()).replace("'", "")
    form = draw(st.sampled_from(["{f} '{v}'", "{f}='{v}'", "{f}.a.b={s}", "{f}.factor={s}"]))
    extra = form.format(f=flag, v=value, s=draw(st.sampled_from(["NaN", "1e999", "[1]", "x", "9" * 300])))
    return f"vllm serve Qwen/Qwen3-8B --max-model-len 8192 {extra}\n"


READERS = {
    "kubernetes": (kubernetes_texts(), "deploy.yaml"),
    "compose": (compose_texts(), "docker-compose.yaml"),
    "helm": (helm_texts(), "values.yaml"),
    "config-tags": (tagged_configs(), "config.yaml"),
    "json-flags": (json_flag_scripts(), "start_api.sh"),
}


def _model(d):
    return str(fuzzlib.model_dir(d))


def command_argv(command: str, path: str, d) -> list[str]:
    """One command on the launch at ``path`` (model and GPU given, so every rule runs)."""
    if command == "plan":
        return ["plan", path, "--model", _model(d), "--gpu", "A100-80GB", "--format", "json"]
    if command == "check":
        return ["check", path, "--model", _model(d), "--gpu", "A100-80GB", "--format", "json", "--host-ram-gib", "256"]
    if command == "check-fix":
        return ["check", path, "--model", _model(d), "--gpu", "A100-80GB", "--fix"]
    if command == "fit":
        return ["fit", "--from", path, "--model", _model(d), "--gpu", "A100-80GB", "--format", "json"]
    if command == "host":
        return ["host", "--launch", path, "--root", str(HOST_ROOT), "--format", "json"]
    return ["export", "launch", path, "--to", "kubernetes"]


COMMANDS = ("plan", "check", "check-fix", "fit", "host", "export")


def cases():
    """(name, strategy, build(tmpdir, value) -> argv) per reader, for the campaign: a drawn
    (text, command) pair, written to a file of the reader's name and run through that command."""
    out = []
    for reader, (strategy, name) in sorted(READERS.items()):
        def build(d, value, _name=name):
            text, command = value
            path = fuzzlib.write(d, _name, text)
            return command_argv(command, str(path), d)

        out.append((f"launch-{reader}", st.tuples(strategy, st.sampled_from(COMMANDS)), build))
    return out
