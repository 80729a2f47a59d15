"""Generators of hostile inputs for every command, and one in-process runner that judges a run.

Shared by the property tests (``tests/property/test_fuzz_commands.py``, a fixed example budget)
and the long campaign (``benchmarks/fuzz.py``). Each generator is a hypothesis strategy that
draws the *text* of one input kind; a case writes it to a file and runs one command on it. A
run is judged by :func:`judge`: exit code in the documented set, no traceback, within the time
and memory bounds, and none of the planted secrets in anything printed.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import resource
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st

EXIT_CODES = {0, 1, 2, 3}
# Commands whose documented set is larger: watch also exits 4 (server unreachable).
EXIT_CODES_BY_COMMAND = {"watch": {0, 1, 2, 3, 4}}
TIME_LIMIT_S = 30.0
MEMORY_LIMIT_BYTES = 1 << 30

# Secrets planted in inputs; none may appear in any output. Distinctive so that a hit is a leak.
SECRET_API_KEY = "zqFUZZapikey7731"
SECRET_HF = "hf_zqFUZZhftokenABCDEFGH1234"
SECRET_JSON = "zqFUZZjsonpw5519"
SECRET_URL = "zqFUZZurlpw0042"
SECRET_BEARER = "zqFUZZbearer88A1"
SECRETS = (SECRET_API_KEY, SECRET_HF, SECRET_JSON, SECRET_URL, SECRET_BEARER)

MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16", "rope_theta": 500000.0,
}

# -- building blocks ------------------------------------------------------------------------

# Numerals every reader must take or refuse in one line: huge (past int()'s 4,300-digit limit,
# past int64, overflowing a double), tiny, NaN/inf, negative, Python-only spellings, non-ASCII
# digits (Arabic-Indic, fullwidth, CJK), and absurd parallel sizes.
HOSTILE_NUMERALS = [
    "0", "-1", "-0", "+5", "1_000", "0x10", "0o17", "1e999", "-1e999", "1e308", "-1e308", "1e-320", "nan", "NaN",
    "inf", "-inf", "Infinity", "9" * 5000, "9" * 400, "18446744073709551616", "9223372036854775808", "100000",
    "1000000", "1.2.3", ".", "", "  7 ", "٣", "١٢٣", "１２", "八", "2**40", "1,000", "12.5", "1e3", "-9" * 30,
]
# The handful the per-reader matrix test feeds each slot (one of each kind above).
MATRIX_NUMERALS = ["-1", "+5", "1_000", "0x10", "1e999", "1e308", "1e-320", "nan", "-inf", "9" * 5000,
                   "18446744073709551616", "1000000", "1.2.3", "", "١٢٣", "１２", "12.5", "1,000"]
_WEIRD_NUMBERS = HOSTILE_NUMERALS
_NUMBERS = st.one_of(st.integers(-10, 1 << 40).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                     st.sampled_from(HOSTILE_NUMERALS), st.integers(-(10 ** 30), 10 ** 30).map(str))
_WORDS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_FLAGS = ["--max-model-len", "--gpu-memory-utilization", "--tensor-parallel-size", "--max-num-seqs",
          "--max-num-batched-tokens", "--kv-cache-dtype", "--block-size", "--swap-space", "--cpu-offload-gb",
          "--dtype", "--quantization", "--pipeline-parallel-size", "--enforce-eager", "--enable-prefix-caching",
          "--kv-cache-memory-bytes", "--served-model-name", "--port", "--no-such-flag", "--max-model-len=",
          "-tp", "--limit-mm-per-prompt", "--hf-overrides", "--speculative-config", "--data-parallel-size",
          "--num-gpu-blocks-override", "--kv-cache-memory", "--max-seq-len-to-capture", "-pp"]

_SECRET_BITS = [
    f"--api-key {SECRET_API_KEY}",
    f"--api-key={SECRET_API_KEY}",
    f"--hf-token {SECRET_HF}",
    "--kv-transfer-config '{\"kv_connector\":\"X\",\"kv_connector_extra_config\":{\"password\":\"" + SECRET_JSON + "\"}}'",
    "--kv-transfer-config '{\"kv_connector\":\"X\",\"kv_connector_extra_config\":{\"url\":\"http://u:" + SECRET_URL + "@h:1\"}}'",
]


@st.composite
def flag_words(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        flag = draw(st.sampled_from(_FLAGS))
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts.append(f"{flag} {draw(_NUMBERS)}")
        elif kind == 1:
            parts.append(f"{flag} {json.dumps(draw(_WORDS))}")
        elif kind == 2:
            parts.append(flag)
        else:
            parts.append(f"{flag}={draw(_NUMBERS)}")
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(_SECRET_BITS)))
    return " ".join(parts)


@st.composite
def launch_scripts(draw) -> str:
    """A start_api.sh: env lines, variables, quoting oddities, one vllm serve, planted secrets."""
    lines = ["#!/bin/bash"]
    if draw(st.booleans()):
        lines.append(f"export HF_TOKEN={SECRET_HF}")
    if draw(st.booleans()):
        lines.append('MODEL="${MODEL:-Qwen/Qwen3-8B}"')
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from([
            'X=a; X="$X$X"; X="$X$X"; X="$X$X"', "Y=$'tab\\there'", "echo `date`", "set -euo pipefail",
            "if [ -n \"$A\" ]; then", "fi", "exec \\", "# comment with --api-key " + SECRET_API_KEY,
        ])))
    model = draw(st.sampled_from(["Qwen/Qwen3-8B", "$MODEL", "/nonexistent/model", '"Qwen/Qwen3-8B"', ""]))
    cont = draw(st.sampled_from([" ", " \\\n  "]))
    lines.append(f"vllm serve {model}{cont}{draw(flag_words())}")
    if draw(st.booleans()):
        lines.append(draw(_WORDS))
    return "\n".join(lines) + "\n"


@st.composite
def yaml_configs(draw) -> str:
    """A vLLM --config YAML: typed oddities (lists, dates, nesting), aliases, secrets."""
    key = draw(st.sampled_from(["max-model-len", "gpu-memory-utilization", "tensor-parallel-size", "max_num_seqs",
                                "kv-cache-dtype", "api-key", "model", "unknown-key"]))
    value = draw(st.one_of(_NUMBERS, st.sampled_from(["[1, 2]", "{a: 1}", "2024-01-01", "null", "true", "~",
                                                      "&a [*a]", "!!python/object:os.system x", ".nan", "-.inf",
                                                      "1.0e999", "0x10", "0o17", "1_000", "1:30:00", "+5"])))
    if key == "api-key" and draw(st.booleans()):
        value = "'" + SECRET_API_KEY + "'"  # a secret by its key's name: never printed
    body = [f"model: Qwen/Qwen3-8B", f"{key}: {value}"]
    if draw(st.booleans()):
        body.append(f"api-key: {SECRET_API_KEY}")
    if draw(st.booleans()):
        body.append("nested: " + "[" * draw(st.integers(1, 200)))
    if draw(st.booleans()):
        body.append('a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: [*b,*b,*b,*b,*b,*b,*b,*b,*b]')
    return "\n".join(body) + "\n"


@st.composite
def model_configs(draw) -> str:
    """config.json: the Llama config with one field made hostile (or the whole file broken)."""
    cfg = dict(MODEL_CONFIG)
    field_ = draw(st.sampled_from(sorted(cfg) + ["rope_scaling", "quantization_config", "text_config"]))
    bad = draw(st.one_of(
        st.sampled_from([0, -1, 1e308, 10**30, None, "", "nan", [], {}, True, "bfloat16", 2.5]),
        st.floats(allow_nan=True, allow_infinity=True), st.integers(-(1 << 70), 1 << 70)))
    cfg[field_] = bad
    text = json.dumps(cfg, allow_nan=True)
    mode = draw(st.integers(0, 5))
    if mode == 0:
        text = text[: draw(st.integers(0, len(text)))]
    elif mode == 1:
        text = "[" * 5000 + "]" * 5000
    return text


# The registry sweep's class-default configs of the families given native adapters or generic-path shapes in
# session six (Falcon-H1, Zamba2, Whisper, ModernBERT, CLIP/SigLIP, mllama, Gemma-3n, GLM-5/DSA, Kimi-Linear,
# ERNIE): model_configs above only ever mutates a Llama.
_ARCH_FAMILIES = ("FalconH1", "FalconMamba", "Zamba2", "Whisper", "ModernBert", "CLIPModel", "SiglipModel",
                  "Gemma3n", "GlmMoeDsa", "Glm4MoeLite", "KimiLinear", "Ernie4_5")
_ARCH_CONFIGS: list[dict] = []


def _arch_configs() -> list[dict]:
    if not _ARCH_CONFIGS:
        data = json.loads((Path(__file__).resolve().parents[1] / "data" / "oracle" / "sweep_vllm-0.32.0.json").read_text())
        _ARCH_CONFIGS.extend(c["config"] for c in data["cases"]
                             if "config" in c and any(f in c["id"] for f in _ARCH_FAMILIES))
        _ARCH_CONFIGS.append(json.loads((Path(__file__).resolve().parents[2] / "src" / "oomguard" / "data" / "models"
                                         / "meta-llama__Llama-3.2-11B-Vision-Instruct" / "config.json").read_text()))
    return _ARCH_CONFIGS


_HOSTILE_VALUES = [0, -1, 1.5, 2.5, 10**30, 1 << 70, 1e308, -10**6, None, "", "x", "12", [], {}, True, [1], [[1]],
                   float("nan"), float("inf")]


@st.composite
def arch_model_configs(draw) -> str:
    """config.json of a new family with one field (top level or in a sub-config) made hostile: a hostile scalar, a
    list of the wrong length or type, a sub-config of the wrong type, or the field removed."""
    cfg = copy.deepcopy(_arch_configs()[draw(st.integers(0, len(_arch_configs()) - 1))])
    scopes = [cfg] + [v for v in cfg.values() if isinstance(v, dict)]
    scope = draw(st.sampled_from(scopes))
    extra = ["num_hidden_layers", "mamba_d_state", "cross_attention_layers", "layer_types", "intermediate_size",
             "text_config", "vision_config"]
    name = draw(st.sampled_from(sorted(scope) + extra))
    cur = scope.get(name)
    layers = scope.get("num_hidden_layers") if isinstance(scope.get("num_hidden_layers"), int) else 4
    choices = [st.sampled_from(_HOSTILE_VALUES), st.just("MISSING"),
               st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=True, allow_infinity=True)]
    if isinstance(cur, list) and cur:
        choices.append(st.sampled_from([cur[:-1], cur + cur[-1:], cur[:1] * 1000, [None] * len(cur),
                                        [-1] + cur[1:], [10**6] + cur[1:], [str(x) + "?" for x in cur]]))
    if isinstance(cur, int) and not isinstance(cur, bool):
        choices.append(st.sampled_from([cur * 10**4, -cur, cur + 0.5]))
    if name == "cross_attention_layers":
        choices.append(st.lists(st.integers(-(1 << 40), 1 << 40), max_size=6))
    if name in ("layer_types", "intermediate_size"):
        choices.append(st.sampled_from([["full_attention"] * (layers + 3), ["full_attention"], [1024] * (layers + 2),
                                        [1024], ["x"] * layers]))
    value = draw(st.one_of(choices))
    if isinstance(value, str) and value == "MISSING":
        scope.pop(name, None)
    else:
        scope[name] = value
    return json.dumps(cfg, allow_nan=True)


_LOG_LINES = [
    "INFO 05-01 10:00:00 [gpu_model_runner.py:1] Model loading took {n} GiB and 3.2 seconds",
    "INFO 05-01 10:00:01 [kv_cache_utils.py:1] GPU KV cache size: {n} tokens",
    "INFO 05-01 10:00:01 [kv_cache_utils.py:1] Maximum concurrency for {n} tokens per request: {n}x",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} GiB. GPU 0 has a total capacity of {n} GiB of which {n} MiB is free.",
    "ValueError: To serve at least one request with the models's max seq len ({n}), ({n} GiB KV cache is needed, which is larger than the available KV cache memory ({n} GiB).",
    "[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered",
    "Out of memory: Killed process {n} (python3) total-vm:{n}kB, anon-rss:{n}kB",
    "INFO 05-01 10:00:02 [api_server.py:1] non-default args: {{'api_key': ['" + SECRET_API_KEY + "'], 'model': 'x'}}",
    "Authorization: Bearer " + SECRET_BEARER,
    "HF_TOKEN=" + SECRET_HF,
    "ERROR 05-01 10:00:03 [core.py:1] EngineCore encountered an issue. See stack trace (above) for the root cause.",
    "INFO:     Uvicorn running on http://0.0.0.0:8000",
    "显存不足 OOM 了",
]


@st.composite
def log_texts(draw) -> str:
    """A vLLM log: real line shapes with hostile numbers, noise, escapes, very long lines."""
    out = []
    for _ in range(draw(st.integers(0, 25))):
        tmpl = draw(st.sampled_from(_LOG_LINES + ["{w}"]))
        out.append(tmpl.format(n=draw(_NUMBERS), w=draw(_WORDS)))
    if draw(st.booleans()):
        out.append("x" * draw(st.sampled_from([10, 70000, 300000])))
    if draw(st.booleans()):
        out.append("\x1b[31mred\x1b[0m \x00\x01 \udcff".encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    return "\n".join(out) + ("\n" if draw(st.booleans()) else "")


@st.composite
def nvidia_smi_texts(draw) -> str:
    rows = ["index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]"] if draw(st.booleans()) else []
    for i in range(draw(st.integers(0, 9))):
        rows.append(f"{draw(_NUMBERS)}, NVIDIA A100-SXM4-80GB, {draw(_NUMBERS)} MiB, {draw(_NUMBERS)} MiB, {draw(_NUMBERS)}")
    if draw(st.booleans()):
        rows.append(draw(_WORDS))
    return "\n".join(rows) + "\n"


@st.composite
def topo_texts(draw) -> str:
    n = draw(st.integers(0, 9))
    cells = ["X", "NV12", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "??", ""]
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity"
    rows = [head]
    for i in range(draw(st.integers(0, n + 2))):
        rows.append(f"GPU{i}\t" + "\t".join(draw(st.sampled_from(cells)) for _ in range(n)) + f"\t{draw(_NUMBERS)}\t{draw(_NUMBERS)}")
    return "\n".join(rows) + "\n"


_MORE_LOG_LINES = [
    "INFO 05-01 10:00:01 [gpu_worker.py:1] Available KV cache memory: {n} GiB",
    "INFO 05-01 10:00:01 [kv_cache_utils.py:1] # GPU blocks: {n}, # CPU blocks: {n}",
    "INFO 05-01 10:00:00 [api_server.py:1] non-default args: {{'max_model_len': {n}, 'tensor_parallel_size': {n}, "
    "'gpu_memory_utilization': {n}}}",
    "INFO 05-01 10:00:02 [gpu_model_runner.py:1] Graph capturing finished in {n} secs, took {n} GiB",
    "INFO 05-01 10:00:02 [worker.py:1] Memory profiling takes {n} seconds",
    "(EngineCore_DP0 pid={n}) ERROR 05-01 10:00:03 [core.py:1] EngineCore failed to start.",
    "[{n}] Memory cgroup out of memory: Killed process {n} (python3) total-vm:{n}kB, anon-rss:{n}kB, file-rss:0kB",
    "[{n}] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),task_memcg=/x,task=python3,pid={n},uid=0",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} MiB. GPU {n} has a total capacity of {n} GiB "
    "of which {n} GiB is free. Including non-PyTorch memory, this process has {n} GiB memory in use.",
    "INFO 05-01 10:00:00 [__init__.py:1] vLLM API server version {n}",
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version {n}",
    "ValueError: The model's max seq len ({n}) is larger than the maximum number of tokens that can be stored in KV "
    "cache ({n}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
]
_LOG_LINES.extend(_MORE_LOG_LINES)


@st.composite
def numbered(draw, template: str) -> str:
    """``template`` with every ``{n}`` replaced by its own drawn numeral."""
    parts = template.split("{n}")
    out = parts[0]
    for p in parts[1:]:
        out += draw(_NUMBERS) + p
    return out


# -- JSON-valued flags ------------------------------------------------------------------------

_JSON_SCALARS = ["NaN", "Infinity", "-Infinity", "1e999", "1e308", "-1", "0", "9" * 5000, "18446744073709551616",
                 "1.5", "true", "null", '"8192"', '"x"', "[]", "{}", '[1, "a", null]', '{"a": {"b": NaN}}']
_JSON_FLAGS = {
    "--hf-overrides": ["rope_scaling", "rope_scaling.factor", "rope_scaling.original_max_position_embeddings",
                       "rope_scaling.rope_type", "max_position_embeddings", "num_hidden_layers", "num_key_value_heads",
                       "text_config.max_position_embeddings", "text_config.rope_scaling", "rope_theta"],
    "--kv-transfer-config": ["kv_connector", "kv_role", "kv_buffer_size", "kv_connector_extra_config",
                             "kv_connector_extra_config.cpu_bytes_to_use", "kv_parallel_size"],
    "--compilation-config": ["cudagraph_capture_sizes", "cudagraph_mode", "max_capture_size", "level", "mode",
                             "max_cudagraph_capture_size", "full_cuda_graph"],
    "--speculative-config": ["method", "num_speculative_tokens", "model", "draft_tensor_parallel_size",
                             "max_model_len"],
    "--limit-mm-per-prompt": ["image", "video", "audio"],
    "--kv-offloading-size": [],
    "--rope-scaling": ["factor", "rope_type", "original_max_position_embeddings"],
}


def _json_text(pairs: list[tuple[str, str]]) -> str:
    """A JSON object from dotted keys and raw value texts (raw: NaN, 5000-digit ints stay literal)."""
    tree: dict = {}
    for key, raw in pairs:
        node = tree
        parts = key.split(".")
        for k in parts[:-1]:
            nxt = node.get(k)
            if not isinstance(nxt, dict):
                nxt = node[k] = {}
            node = nxt
        node[parts[-1]] = raw

    def render(n) -> str:
        if isinstance(n, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {render(v)}" for k, v in n.items()) + "}"
        return n

    return render(tree)


@st.composite
def json_flag_launches(draw) -> str:
    """A start_api.sh whose JSON-valued flags hold values of the wrong type and hostile numbers."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        flag = draw(st.sampled_from(sorted(_JSON_FLAGS)))
        keys = _JSON_FLAGS[flag]
        if not keys or draw(st.integers(0, 5)) == 0:
            text = draw(st.sampled_from(_JSON_SCALARS + ["{", "[[[[", '{"a":1,}']))
        else:
            pairs = []
            for _ in range(draw(st.integers(1, 4))):
                value = draw(st.one_of(st.sampled_from(_JSON_SCALARS), _NUMBERS.map(
                    lambda t: t if t and t.lstrip("-").replace(".", "", 1).isdigit() else json.dumps(t))))
                pairs.append((draw(st.sampled_from(keys)), value))
            text = _json_text(pairs)
        parts.append(f"{flag} '{text}'")
    if draw(st.booleans()):
        parts.append(draw(flag_words()))
    return "#!/bin/bash\nvllm serve Qwen/Qwen3-8B " + " ".join(parts) + "\n"


# -- host: /proc and /sys trees, nvidia-smi CSV for host, nvidia-smi tables ------------------


@st.composite
def proc_trees(draw) -> dict:
    """A fake root's /proc and /sys files with hostile numbers in every numeric field."""
    n = lambda: draw(_NUMBERS)  # noqa: E731
    tree = {
        "proc/meminfo": "".join(f"{k}: {n() if draw(st.booleans()) else '1000'} kB\n" for k in
                                ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal",
                                 "SwapFree", "CommitLimit", "Committed_AS"))
                        + (f"HugePages_Total: {n()}\n" if draw(st.booleans()) else ""),
        "proc/swaps": "Filename\tType\tSize\tUsed\tPriority\n" + (
            f"/swapfile file {n()} {n()} {n()}\n" if draw(st.booleans()) else ""),
        "proc/sys/vm/overcommit_memory": n() + "\n",
        "proc/sys/vm/max_map_count": n() + "\n",
        "proc/sys/vm/overcommit_ratio": n() + "\n",
        "proc/mounts": "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=" + draw(st.sampled_from(
            [n() + "k", n() + "%", n(), n() + "G", "64g"])) + " 0 0\n",
        "proc/self/limits": f"Max open files            {n()}                 {n()}                 files\n",
        "proc/self/cgroup": "0::/vllm.service\n",
        "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
        "sys/fs/cgroup/vllm.service/memory.max": draw(st.sampled_from(["max", n(), n()])) + "\n",
        "sys/fs/cgroup/vllm.service/memory.current": n() + "\n",
        "sys/devices/system/node/node0/cpulist": draw(st.sampled_from(
            ["0-31", f"0-{n()}", f"{n()}-3", n(), "3-1", "0-99999999999", "0,,2"])) + "\n",
        "sys/devices/system/node/node0/meminfo": f"Node 0 MemTotal: {n()} kB\nNode 0 MemFree: {n()} kB\n",
    }
    if draw(st.booleans()):
        pid = draw(st.sampled_from(["4242", "9" * 30, "١٢", "0"]))
        tree[f"proc/{pid}/cmdline"] = "python3\x00-m\x00vllm.entrypoints.openai.api_server\x00"
        tree[f"proc/{pid}/oom_score_adj"] = n() + "\n"
    if draw(st.booleans()):  # a cgroup v1 layout instead
        tree["proc/self/cgroup"] = "4:memory:/docker/abc\n"
        tree["sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"] = n() + "\n"
        tree["sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes"] = n() + "\n"
    return tree


@st.composite
def host_smi_csvs(draw) -> str:
    """The CSV `oomguard host --nvidia-smi` reads: GPU rows and process rows, hostile cells."""
    rows = ["index, uuid, name, memory.total [MiB], memory.used [MiB]"]
    for _ in range(draw(st.integers(0, 6))):
        rows.append(f"{draw(_NUMBERS)}, GPU-{draw(st.integers(0, 3))}, NVIDIA H100, {draw(_NUMBERS)} MiB, "
                    f"{draw(_NUMBERS)} MiB")
    if draw(st.booleans()):
        rows.append("gpu_uuid, pid, process_name, used_gpu_memory [MiB]")
        for _ in range(draw(st.integers(0, 4))):
            rows.append(f"GPU-{draw(st.integers(0, 3))}, {draw(_NUMBERS)}, python3, {draw(_NUMBERS)} MiB")
    if draw(st.booleans()):
        rows.append(draw(_WORDS))
    return "\n".join(rows) + "\n"


@st.composite
def smi_tables(draw) -> str:
    """The default `nvidia-smi` table with hostile numbers in the GPU, memory and process lines."""
    n = lambda: draw(_NUMBERS)  # noqa: E731
    lines = ["+-----------------------------------------------------------------------------+",
             f"| NVIDIA-SMI {n()}       Driver Version: {n()}       CUDA Version: {n()}     |",
             "|===============================+======================+======================|"]
    for _ in range(draw(st.integers(0, 4))):
        lines.append(f"|   {n()}  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |   0 |")
        lines.append(f"| N/A   34C    P0   113W /  700W |   {n()}MiB /  {n()}MiB |   {n()}%   Default |")
    lines.append("| Processes:                                                                  |")
    for _ in range(draw(st.integers(0, 3))):
        lines.append(f"|    {n()}   N/A  N/A     {n()}      C   python3      {n()}MiB |")
    return "\n".join(lines) + "\n"


# -- oomguard's own numeric options -----------------------------------------------------------

_OPTION_SLOTS = [
    ("plan", "--gpu-memory-gib"), ("plan", "--num-gpus"), ("plan", "--other-gpu-use-gib"),
    ("fit", "--context"), ("fit", "--concurrency"), ("fit", "--host-ram-gib"), ("fit", "--margin-gib"),
    ("fit", "--avg-input-len"), ("fit", "--peak-limit-gib"), ("fit", "--top"), ("check", "--host-ram-gib"),
    ("diagnose", "--num-gpus"), ("export-alerts", "--kv-threshold"), ("export-alerts", "--kv-for"),
    ("probe", "--max-model-len"), ("probe", "--duration"), ("probe", "--concurrency"), ("watch", "--interval"),
    ("watch", "--alert-kv"), ("watch", "--duration"),
]


@st.composite
def option_values(draw) -> str:
    """``COMMAND OPTION VALUE`` for one of oomguard's numeric options, as one line of text."""
    command, option = draw(st.sampled_from(_OPTION_SLOTS))
    return f"{command}\t{option}\t{draw(_NUMBERS)}"


# -- running and judging ------------------------------------------------------------------------


@dataclass
class Outcome:
    argv: list[str]
    code: int | None
    out: str
    err: str
    seconds: float
    grew_bytes: int
    traceback: str | None = None
    problems: list[str] = field(default_factory=list)
    time_limit_s: float = TIME_LIMIT_S


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class OverTime(BaseException):
    """Raised by the alarm inside a run that outlived its time limit (BaseException: no
    ``except Exception`` in the code under test swallows it)."""


def _alarm(signum, frame):  # noqa: ARG001
    raise OverTime()


def run_inprocess(argv: list[str], env: dict[str, str] | None = None, time_limit_s: float = TIME_LIMIT_S) -> Outcome:
    """``oomguard ARGV`` in this process, stdout/stderr captured; an escaping exception is a traceback.

    A run past ``time_limit_s`` is interrupted by SIGALRM (main thread only) and judged over time.
    """
    import signal

    from oomguard.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    before, t0 = _peak_rss(), time.perf_counter()
    code: int | None = None
    tb = None
    over = False
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exc:  # argparse's own usage errors
                code = exc.code if isinstance(exc.code, int) else 2
    except OverTime:
        over = True
    except BaseException:  # noqa: BLE001 - that is the finding
        tb = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    took = time.perf_counter() - t0
    return Outcome(list(argv), code, out.getvalue(), err.getvalue(), max(took, time_limit_s + 0.001) if over else took,
                   max(0, _peak_rss() - before), tb, time_limit_s=time_limit_s)


def judge(o: Outcome, *, secrets: tuple[str, ...] = SECRETS) -> Outcome:
    if o.traceback is not None:
        o.problems.append("traceback: " + o.traceback.strip().splitlines()[-1])
    elif o.code is None and o.seconds > o.time_limit_s:
        pass  # interrupted; reported as over time below
    elif o.code not in EXIT_CODES_BY_COMMAND.get(o.argv[0] if o.argv else "", EXIT_CODES):
        allowed = EXIT_CODES_BY_COMMAND.get(o.argv[0] if o.argv else "", EXIT_CODES)
        o.problems.append(f"exit code {o.code!r} not in {sorted(allowed)}")
    if "Traceback (most recent call last)" in o.err + o.out:
        o.problems.append("a traceback was printed")
    if "internal error" in o.err:
        # A caught crash is still a crash: the CLI's last line of defence fired (exit 3).
        line = next((ln for ln in o.err.splitlines() if "internal error" in ln), "")
        o.problems.append("caught crash: " + line.strip()[:200])
    if o.seconds > o.time_limit_s:
        o.problems.append(f"over time: took {o.seconds:.1f}s (> {o.time_limit_s:.0f}s)")
    if "error: out of memory" in o.err:  # the CLI caught a MemoryError: bounded only by the machine
        o.problems.append("over memory: MemoryError caught (peak RSS grew past what the process could get)")
    if o.grew_bytes > MEMORY_LIMIT_BYTES:
        o.problems.append(f"peak RSS grew {o.grew_bytes >> 20} MiB (> 1 GiB)")
    for s in secrets:
        if s in o.out or s in o.err:
            o.problems.append(f"planted secret {s[:10]}... printed")
    return o


def write(dirpath: Path, name: str, text: str) -> Path:
    path = dirpath / name
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


def model_dir(dirpath: Path, config_text: str | None = None) -> Path:
    d = dirpath / "model"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(config_text if config_text is not None else json.dumps(MODEL_CONFIG))
    return d


# Each case: (name, strategy, build(tmpdir, text) -> argv). Commands never reach the network:
# models are local config dirs, HF_HUB_OFFLINE is set, probe only talks to loopback.
HOST_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "host" / "roots" / "two_numa_4x4090"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OOMGUARD_LLM_BASE_URL": ""}


def cases():
    def plan(d, t):
        return ["plan", str(write(d, "start_api.sh", t)), "--model", str(model_dir(d)), "--gpu", "A100-80GB"]

    def check(d, t):
        return ["check", str(write(d, "start_api.sh", t)), "--model", str(model_dir(d)), "--gpu", "A100-80GB",
                "--format", "json"]

    def check_yaml(d, t):
        return ["check", str(write(d, "config.yaml", t)), "--model", str(model_dir(d)), "--gpu", "H100"]

    def fit_from(d, t):
        return ["fit", "--from", str(write(d, "start_api.sh", t)), "--model", str(model_dir(d)), "--gpu", "A100-80GB"]

    def plan_config(d, t):
        return ["plan", "--model", str(model_dir(d, t)), "--gpu", "A100-80GB", "--max-model-len", "8192"]

    def diagnose(d, t):
        return ["diagnose", str(write(d, "vllm.log", t)), "--format", "json"]

    def bundle(d, t):
        return ["bundle", str(write(d, "vllm.log", t))]

    def diagnose_smi(d, t):
        return ["diagnose", str(write(d, "nvidia-smi.csv", t))]

    def host_topo(d, t):
        return ["host", "--root", str(d), "--topo", str(write(d, "topo.txt", t)), "--format", "json"]

    def check_topo(d, t):
        return ["check", "--gpu", "A100-80GB", "--topo", str(write(d, "topo.txt", t)), "--", "vllm", "serve",
                str(model_dir(d)), "--tensor-parallel-size", "2"]

    def export_launch(d, t):
        return ["export", "launch", str(write(d, "start_api.sh", t)), "--to", "kubernetes"]

    def host_launch(d, t):
        return ["host", "--root", str(d), "--launch", str(write(d, "start_api.sh", t))]

    def plan_json_flags(d, t):
        return ["plan", str(write(d, "start_api.sh", t)), "--gpu", "H100", "--format", "json"]

    def check_json_flags(d, t):
        return ["check", str(write(d, "start_api.sh", t)), "--gpu", "H100", "--format", "json"]

    def fit_json_flags(d, t):
        return ["fit", "--from", str(write(d, "start_api.sh", t)), "--gpu", "H100"]

    def plan_yaml(d, t):
        return ["plan", str(write(d, "config.yaml", t)), "--model", str(model_dir(d)), "--gpu", "H100"]

    def host_proc(d, tree):
        root = d / "root"
        for rel, text in tree.items():
            f = root / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
        return ["host", "--root", str(root), "--format", "json"]

    def host_smi(d, t):
        return ["host", "--root", str(HOST_ROOT), "--nvidia-smi", str(write(d, "gpus.csv", t)), "--format", "json"]

    def check_smi(d, t):
        return ["check", "--gpu", "A100-80GB", "--nvidia-smi", str(write(d, "gpus.csv", t)), "--", "vllm", "serve",
                str(model_dir(d))]

    def diagnose_table(d, t):
        return ["diagnose", str(write(d, "nvidia-smi.txt", t))]

    def options(d, line):
        command, option, value = line.split("\t")
        base = {
            "plan": ["plan", "--model", str(model_dir(d)), "--gpu", "H100"],
            "fit": ["fit", "--model", str(model_dir(d)), "--gpu", "H100"],
            "check": ["check", "--gpu", "H100", "--", "vllm", "serve", str(model_dir(d))],
            "diagnose": ["diagnose", str(write(d, "vllm.log", "INFO x\n"))],
            "export-alerts": ["export", "alerts"],
            # nothing listens on port 9: connection refused at once, never the network
            "probe": ["probe", "--base-url", "http://127.0.0.1:9", "--no-local", "--no-progress", "--timeout", "1"],
            "watch": ["watch", "--base-url", "http://127.0.0.1:9", "--remote", "--gone-after", "1s", "--duration", "1"],
        }[command]
        at = base.index("--") if "--" in base else len(base)
        return base[:at] + [f"{option}={value}"] + base[at:]

    return [
        ("plan-launch", launch_scripts(), plan),
        ("check-launch", launch_scripts(), check),
        ("check-yaml", yaml_configs(), check_yaml),
        ("fit-from", launch_scripts(), fit_from),
        ("plan-config-json", model_configs(), plan_config),
        ("plan-config-archs", arch_model_configs(), plan_config),
        ("diagnose-log", log_texts(), diagnose),
        ("bundle-log", log_texts(), bundle),
        ("diagnose-nvidia-smi", nvidia_smi_texts(), diagnose_smi),
        ("host-topo", topo_texts(), host_topo),
        ("check-topo", topo_texts(), check_topo),
        ("export-launch", launch_scripts(), export_launch),
        ("host-launch", launch_scripts(), host_launch),
        ("plan-json-flags", json_flag_launches(), plan_json_flags),
        ("check-json-flags", json_flag_launches(), check_json_flags),
        ("fit-json-flags", json_flag_launches(), fit_json_flags),
        ("plan-yaml", yaml_configs(), plan_yaml),
        ("host-proc", proc_trees(), host_proc),
        ("host-nvidia-smi", host_smi_csvs(), host_smi),
        ("check-nvidia-smi", nvidia_smi_texts(), check_smi),
        ("diagnose-smi-table", smi_tables(), diagnose_table),
        ("cli-options", option_values(), options),
    ]


# -- HTTP responses (probe) ------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    stream: bool = False  # send the body as chunked SSE for POSTs that ask for a stream


_BODIES = [
    b"", b"{}", b"[]", b"null", b'{"error": {"message": "EngineCore encountered an issue. See stack trace (above)"}}',
    b'{"data": [{"id": "tiny\x1b]0;x\x07", "max_model_len": 1e999}]}', b'{"data": "not a list"}',
    b'{"data": [{"id": null, "max_model_len": "8192"}]}', b'{"choices": [{"text": "\x1b[2Jhi"}]}',
    b"<html>502 Bad Gateway</html>", b"[" * 100000, b'{"object": "list", "data": [' + b" " * 200000,
    b'{"error": "Unauthorized", "key": "' + SECRET_BEARER.encode() + b'"}',
]
_SSE = [
    b'data: {"choices": [{"text": "a"}]}\n\n', b"data: [DONE]\n\n", b": ping\n\n", b"data: {not json\n\n",
    b"event: x\n", b"garbage line\n", b'data: {"error": {"message": "CUDA out of memory", "code": 500}}\n\n',
    b"data: " + b"x" * 70000 + b"\n\n", b'data: {"choices": []}\n\n', b'data: {"usage": {"completion_tokens": "x"}}\n\n',
]


@st.composite
def http_responses(draw) -> Response:
    import gzip
    import zlib

    status = draw(st.sampled_from([200, 200, 200, 201, 204, 301, 400, 401, 404, 413, 429, 500, 502, 503, 599]))
    stream = draw(st.booleans())
    if stream:
        body = b"".join(draw(st.lists(st.sampled_from(_SSE), max_size=12)))
        ctype = draw(st.sampled_from(["text/event-stream", "text/event-stream; charset=utf-8", "application/json"]))
    else:
        body = draw(st.one_of(st.sampled_from(_BODIES), st.binary(max_size=300)))
        ctype = draw(st.sampled_from(["application/json", "text/plain", "text/html; charset=latin-1", ""]))
    headers = [("Content-Type", ctype)] if ctype else []
    enc = draw(st.sampled_from(["", "", "gzip", "deflate", "br", "gzip, gzip", "identity", "bogus"]))
    if enc == "gzip":
        body = gzip.compress(body)
    elif enc == "deflate":
        body = zlib.compress(body)
    if enc:
        headers.append(("Content-Encoding", enc))
    return Response(status, tuple(headers), body, stream)


class ResponseServer:
    """Loopback HTTP/1.1 server that answers every request with one drawn response."""

    def __init__(self, response: Response, host: str = "127.0.0.1"):
        import socket
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        resp = response

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                return None

            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                try:
                    self.send_response(resp.status)
                    for k, v in resp.headers:
                        self.send_header(k, v)
                    if resp.stream and self.command == "POST":
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for i in range(0, len(resp.body), 4096):
                            part = resp.body[i:i + 4096]
                            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self.send_header("Content-Length", str(len(resp.body)))
                        self.end_headers()
                        self.wfile.write(resp.body)
                except OSError:
                    self.close_connection = True

            do_GET = do_POST = _answer

        class Quiet(ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

            def handle_error(self, request, client_address):
                return None

        self._httpd = Quiet((host, 0), Handler)
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{shown}:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()


PROBE_KEY_ENV = "OOMGUARD_FUZZ_PROBE_KEY"


def probe_argv(base_url: str) -> list[str]:
    return ["probe", "--base-url", base_url, "--api-key-env", PROBE_KEY_ENV, "--max-model-len", "64",
            "--concurrency", "2", "--output-tokens", "4", "--timeout", "1", "--stall-timeout", "1",
            "--duration", "6", "--sample-interval", "0.2", "--no-local", "--no-progress", "--format", "json"]


def watch_argv(base_url: str) -> list[str]:
    return ["watch", "--base-url", base_url, "--api-key-env", PROBE_KEY_ENV, "--interval", "0.2", "--duration", "2",
            "--remote", "--gone-after", "1s", "--format", "json"]
