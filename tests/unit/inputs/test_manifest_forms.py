"""Every manifest form the one reader takes: kinds, wrappers, $(VAR), compose env and GPUs, Helm modelSpecs.

Each test reads a small real manifest with ``oomguard.inputs.reader`` and asserts what the
launch holds (flags, env, release, deployment, the line and key path of a value), or that a
wrong-typed value is one located error.
"""

from __future__ import annotations

import time

import pytest

from oomguard.errors import InputError
from oomguard.inputs.reader import read_launch, read_launches
from oomguard.units import GiB, MiB


def _write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


CONTAINER = """        - name: vllm
          image: vllm/vllm-openai:v0.11.0
          args: ["Qwen/Qwen3-8B", "--max-model-len", "$(LEN)", "--max-num-seqs=16"]
          env:
            - {name: LEN, value: "8192"}
            - {name: VLLM_LOGGING_LEVEL, value: DEBUG}
          resources: {limits: {nvidia.com/gpu: 2, memory: 48Gi}}
"""


def _indent(text: str, by: int) -> str:
    return "".join(" " * by + ln + "\n" for ln in text.splitlines())


def test_cronjob_and_kind_list_items(tmp_path):
    cron = ("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  jobTemplate:\n    spec:\n"
            "      template:\n        spec:\n          containers:\n" + _indent(CONTAINER, 4))
    launch = read_launch(_write(tmp_path, cron))
    assert launch.name == "CronJob nightly/vllm" and launch.flags == {"max_model_len": 8192, "max_num_seqs": 16}
    assert launch.deployment["gpus"] == 2 and launch.deployment["memory_limit_bytes"] == 48 * GiB
    listed = ("apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Service\n    metadata: {name: s}\n"
              "  - apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: d}\n    spec:\n      template:\n"
              "        spec:\n          containers:\n" + _indent(CONTAINER, 4))
    launch = read_launch(_write(tmp_path, listed, "list.yaml"))
    assert launch.name == "Deployment d/vllm" and launch.flags["max_model_len"] == 8192
    assert launch.sites["max_model_len"].yaml_path == "items[1].spec.template.spec.containers[0].args[1]"


def test_k8s_var_expansion_env_and_image_version(tmp_path):
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n" + CONTAINER.replace("        ", "    ")
    launch = read_launch(_write(tmp_path, text))
    assert launch.flags["max_model_len"] == 8192  # $(LEN) from the container's env, as kubelet expands it
    assert launch.env == {"VLLM_LOGGING_LEVEL": "DEBUG"} and launch.env_sites["VLLM_LOGGING_LEVEL"].line == 11
    assert launch.version == "0.11.0" and launch.version_source.origin == "image-tag"
    assert any(n == "vLLM 0.11.0 from the image tag (vllm/vllm-openai:v0.11.0)" for n in launch.notes)
    site = launch.sites["max_num_seqs"]
    line8 = text.splitlines()[7]
    assert (site.line, site.column, site.yaml_path) == (8, line8.index('"--max-num-seqs') + 1, "spec.containers[0].args[3]")
    # --vllm-version wins over the tag, and the note says so
    again = read_launch(tmp_path / "m.yaml", version="0.33")
    assert again.version == "0.33" and any("read with --vllm-version 0.33" in n for n in again.notes)


def test_an_undefined_var_is_unresolved_and_strict_reading_says_so(tmp_path):
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: v\n"
            "      image: vllm/vllm-openai:v0.33.0\n      args: [Qwen/Qwen3-8B, --max-model-len, $(NOPE)]\n")
    p = _write(tmp_path, text)
    with pytest.raises(InputError) as e:
        read_launch(p)
    assert "$(NOPE)" in str(e.value) and ":8:" in str(e.value)
    lenient = read_launch(p, lenient=True)
    assert "max_model_len" not in lenient.flags and lenient.unresolved[0].variables == ("$(NOPE)",)


@pytest.mark.parametrize("command, args", [
    ('["/bin/sh", "-c"]', '["exec vllm serve $(M) --max-model-len 4096 2>&1 | tee /tmp/log"]'),
    ('["bash", "-lc"]', '["export X=1; vllm serve $M --max-model-len 4096"]'),
    ('["env", "VLLM_LOGGING_LEVEL=INFO", "python3", "-m", "vllm.entrypoints.openai.api_server"]',
     '["--model", "Qwen/Qwen3-8B", "--max-model-len", "4096"]'),
])
def test_wrapped_commands_are_read(tmp_path, command, args):
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: v\n"
            f"      image: registry.local/serving:1\n      command: {command}\n      args: {args}\n"
            "      env: [{name: M, value: Qwen/Qwen3-8B}]\n")
    launch = read_launch(_write(tmp_path, text))
    assert launch.model == "Qwen/Qwen3-8B" and launch.flags == {"max_model_len": 4096}


def test_kserve_inference_service_and_serving_runtime(tmp_path):
    isvc = ("apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: llama}\nspec:\n"
            "  predictor:\n    model:\n      modelFormat: {name: huggingface}\n"
            "      args: [--model_name=llama, --model_id=Qwen/Qwen3-8B, --max-model-len=8192]\n"
            "      resources: {limits: {nvidia.com/gpu: 1, memory: 24Gi}}\n")
    launch = read_launch(_write(tmp_path, isvc))
    assert launch.model == "Qwen/Qwen3-8B" and launch.flags == {"max_model_len": 8192}
    assert launch.deployment["memory_limit_bytes"] == 24 * GiB
    runtime = ("apiVersion: serving.kserve.io/v1alpha1\nkind: ServingRuntime\nmetadata: {name: vllm-rt}\nspec:\n"
               "  containers:\n    - name: kserve-container\n      image: vllm/vllm-openai:v0.10.1.1\n"
               "      command: [python, -m, vllm.entrypoints.openai.api_server]\n"
               "      args: [--model=/mnt/models, --max-model-len=4096]\n")
    launch = read_launch(_write(tmp_path, runtime, "rt.yaml"))
    assert launch.model == "/mnt/models" and launch.version == "0.10.1.1"


def test_leader_worker_set_reads_the_leader(tmp_path):
    text = ("apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {name: big}\nspec:\n"
            "  leaderWorkerTemplate:\n    size: 2\n    leaderTemplate:\n      spec:\n        containers:\n"
            "          - name: leader\n            image: vllm/vllm-openai:v0.33.0\n"
            "            command: [sh, -c]\n            args: [\"ray start --head; vllm serve Qwen/Qwen3-8B "
            "--tensor-parallel-size 8 --pipeline-parallel-size 2\"]\n"
            "            resources: {limits: {nvidia.com/gpu: 8}}\n    workerTemplate:\n      spec:\n        containers:\n"
            "          - name: worker\n            image: vllm/vllm-openai:v0.33.0\n            command: [sh, -c, \"ray start\"]\n")
    launch = read_launch(_write(tmp_path, text))
    assert launch.flags == {"tensor_parallel_size": 8, "pipeline_parallel_size": 2}
    assert launch.deployment["pods"] == 2 and launch.deployment["gpus"] == 8


def test_compose_environment_is_env_and_gpus_forms(tmp_path):
    text = ("services:\n  llm:\n    image: vllm/vllm-openai:v0.11.0\n    command: Qwen/Qwen3-8B --max-model-len 8192\n"
            "    environment:\n      HF_TOKEN: hf_abcdefghijklmnopqrstu\n      VLLM_ALLOW_LONG_MAX_MODEL_LEN: 1\n"
            "    gpus:\n      - driver: nvidia\n        count: 2\n    shm_size: 8gb\n    mem_limit: 32g\n")
    launch = read_launch(_write(tmp_path, text, "docker-compose.yaml"))
    assert launch.env == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}  # environment, not a command prefix
    assert launch.model == "Qwen/Qwen3-8B" and launch.flags == {"max_model_len": 8192}
    d = launch.deployment
    assert (d["gpus"], d["shm_bytes"], d["memory_limit_bytes"]) == (2, 8 * GiB, 32 * GiB)
    text2 = text.replace("    gpus:\n      - driver: nvidia\n        count: 2\n", "    gpus: all\n")
    assert read_launch(_write(tmp_path, text2, "c2.yaml")).deployment["gpus"] is None  # all: as many as there are


def test_compose_devices_and_several_services(tmp_path):
    text = ("services:\n  a:\n    image: vllm/vllm-openai:v0.33.0\n    command: [Qwen/Qwen3-8B]\n"
            "    deploy:\n      resources:\n        reservations:\n          devices:\n"
            "            - {capabilities: [gpu], device_ids: ['0', '1', '2']}\n"
            "  b:\n    image: vllm/vllm-openai:v0.33.0\n    command: [Qwen/Qwen3-8B, --max-num-seqs, '4']\n")
    p = _write(tmp_path, text, "compose.yaml")
    a, b = read_launches(p)
    assert (a.name, a.deployment["gpus"]) == ("compose service a", 3) and b.flags == {"max_num_seqs": 4}
    with pytest.raises(InputError, match=r"2 vLLM launches here .*name one as .*#a"):
        read_launch(p)
    assert read_launch(f"{p}#b").flags == {"max_num_seqs": 4}


def test_helm_every_model_spec_the_way_the_chart_renders_it(tmp_path):
    text = ("servingEngineSpec:\n  modelSpec:\n  - name: a\n    repository: vllm/vllm-openai\n    tag: v0.11.0\n"
            "    modelURL: Qwen/Qwen3-8B\n    requestGPU: 2\n    vllmConfig:\n      tensorParallelSize: 2\n"
            "      maxModelLen: 16384\n      futureKnob: 1\n  - name: b\n    repository: vllm/vllm-openai\n"
            "    tag: v0.33.0\n    modelURL: Qwen/Qwen3-8B\n    requestGPU: 1\n    limitMemory: 32Gi\n")
    a, b = read_launches(_write(tmp_path, text, "values.yaml"))
    assert a.flags == {"tensor_parallel_size": 2, "max_model_len": 16384, "enable_prefix_caching": False}
    assert a.version == "0.11.0" and b.version == "0.33.0"
    assert a.deployment["shm_bytes"] == 20 * GiB  # the chart's default emptyDir with tensorParallelSize
    assert b.deployment["shm_bytes"] == 64 * MiB and b.deployment["memory_limit_bytes"] == 32 * GiB
    assert any("futureKnob is not read by the production-stack chart" in n for n in a.notes)
    assert a.sites["max_model_len"].line == 10


@pytest.mark.parametrize("text, needle", [
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers: 5\n", "spec.containers: expected a list, found a number"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - image: vllm/vllm-openai\n      args: \"a b\"\n",
     "args: expected a list of strings"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - image: vllm/vllm-openai\n      args: [m]\n"
     "      resources: {limits: {nvidia.com/gpu: two}}\n", "nvidia.com/gpu: expected a whole number"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - image: vllm/vllm-openai\n      args: [m]\n"
     "      env: [{name: [x]}]\n", "env[0].name: expected a string, found a list"),
    ("services:\n  v:\n    image: vllm/vllm-openai\n    shm_size: [1]\n", "shm_size: expected a single value"),
    ("services:\n  v:\n    image: vllm/vllm-openai\n    gpus: [{count: lots, driver: nvidia}]\n", "gpus[0].count"),
    ("servingEngineSpec:\n  modelSpec:\n  - name: a\n    modelURL: m\n    requestGPU: -1\n", "requestGPU"),
    ("servingEngineSpec:\n  modelSpec:\n  - name: a\n    modelURL: m\n    vllmConfig: [1]\n", "vllmConfig: expected a mapping"),
    ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - image: vllm/vllm-openai:v0.5.0\n      args: [m]\n",
     "names vLLM 0.5.0"),
])
def test_wrong_types_are_one_located_line(tmp_path, text, needle):
    with pytest.raises(InputError) as e:
        read_launch(_write(tmp_path, text))
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and msg.startswith(str(tmp_path / "m.yaml") + ":")


def test_an_alias_bomb_in_a_manifest_is_refused_at_once(tmp_path):
    bomb = "".join(f"x{i}: &x{i} [" + ",".join([f"*x{i - 1}"] * 9 if i else ['"x"'] * 9) + "]\n" for i in range(9))
    p = _write(tmp_path, "apiVersion: v1\nkind: Pod\n" + bomb)
    t0 = time.process_time()
    with pytest.raises(InputError, match="aliases|expands"):
        read_launch(p)
    assert time.process_time() - t0 < 2.0


def test_json_valued_flags_of_the_wrong_type(tmp_path):
    from oomguard.inputs.command import parse_script

    for value, needle in [
        ('[1, 2]', "--kv-transfer-config: expected a JSON object, found a list"),
        ('{"kv_connector_extra_config": "x"}', "kv_connector_extra_config: expected a JSON object"),
        ('{"kv_connector_extra_config": {"cpu_bytes_to_use": -5}}', "cpu_bytes_to_use: expected a non-negative integer"),
        ('{"kv_connector": 5}', "kv_connector: expected a string"),
    ]:
        with pytest.raises(InputError) as e:
            parse_script(f"vllm serve m \\\n  --kv-transfer-config '{value}'\n", path="s.sh")
        assert needle in str(e.value) and str(e.value).startswith("s.sh:2:"), str(e.value)
    for flag, value, needle in [
        ("--speculative-config", '{"num_speculative_tokens": "3"}', "num_speculative_tokens: expected a positive integer"),
        ("--compilation-config", '{"cudagraph_capture_sizes": [1, "x"]}', "cudagraph_capture_sizes: expected a list"),
        ("--compilation-config", '"PIECEWISE"', "expected a JSON object"),
        ("--hf-overrides", '{"rope_scaling": 5}', "rope_scaling"),
        ("--hf-overrides", '{"max_position_embeddings": NaN}', "--hf-overrides"),
        ("--speculative-config", '{"method": "ngram", "x": Infinity}', "not a finite number"),
    ]:
        with pytest.raises(InputError) as e:
            parse_script(f"vllm serve m {flag} '{value}'\n", path="s.sh")
        assert needle in str(e.value) and "\n" not in str(e.value), str(e.value)
    # a dict from YAML is the same value as JSON text
    y = tmp_path / "c.yaml"
    y.write_text("model: m\nhf-overrides:\n  rope_scaling: {rope_type: yarn, factor: 4.0, original_max_position_embeddings: 32768}\n"
                 "kv-transfer-config: {kv_connector: OffloadingConnector, kv_connector_extra_config: {cpu_bytes_to_use: x}}\n")
    with pytest.raises(InputError, match=r"c.yaml:4: .*cpu_bytes_to_use"):
        read_launch(y)
    y.write_text("model: m\nhf-overrides:\n  rope_scaling: {rope_type: yarn, factor: 4.0, original_max_position_embeddings: 32768}\n")
    assert read_launch(y).flags["hf_overrides"]["rope_scaling"]["factor"] == 4.0


def test_explicit_yaml_tags_in_a_config(tmp_path):
    y = tmp_path / "c.yaml"
    for text, line in [("model: m\nmax-model-len: !!int abc\n", 2), ("model: m\nseed: !!timestamp 2020-13-45\n", 2),
                       ("model: m\nmax-num-seqs: !!float " + "9" * 300 + "\n", 2), ("model: m\nx: !!binary zz=\n", None)]:
        y.write_text(text)
        with pytest.raises(InputError) as e:
            read_launch(y)
        assert "\n" not in str(e.value) and (line is None or f"c.yaml:{line}:" in str(e.value)), str(e.value)


@pytest.mark.parametrize("name, text", [
    ("m.yaml", "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - name: &a [*a]\n      image: vllm/vllm-openai\n"),
    ("values.yaml", "servingEngineSpec:\n  modelSpec:\n  - name: a\n    modelURL: m\n    env:\n    - name: &a [*a]\n"),
    ("c.yaml", "model: m\nmax-model-len: &a [*a]\n"),
])
def test_an_alias_inside_its_own_anchor_is_refused(tmp_path, name, text):
    """&a [*a] composes to a cycle; expanding it never ended (found by benchmarks/fuzz_launches.py)."""
    t0 = time.process_time()
    with pytest.raises(InputError, match="refers to itself through an alias"):
        read_launch(_write(tmp_path, text, name))
    assert time.process_time() - t0 < 2.0
