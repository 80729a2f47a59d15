"""One launch, one answer, per founding scenario (issue 17, "How it must be shown").

Each founding deployment of ../shared/scenarios.md (S1: one 1M-token request on an A100 80 GB;
S2: a 13B model on 8 × RTX 3090 under vLLM 0.6.6; S3: 750,000 tokens on 4 × RTX 4090 with a
240 GiB CPU KV tier on a 256 GiB host) is written in the five forms a user meets (a start_api.sh,
a ``vllm serve --config`` YAML, a Kubernetes Deployment, a compose service, production-stack Helm
values). Every form goes through ``plan``, ``check``, ``fit --from``, ``host --launch`` and
``export launch --to kubernetes`` through the real CLI entry point (real files, no mocks), and the
export is read back by ``plan`` and ``check``. The test asserts that the commands agree on the
launch's numbers (KV cache tokens, concurrency, whether it starts and why not, the host RAM it
needs, the first goal-keeping edit) and that the five forms give the same numbers.

S3 is written as vLLM 0.33 accepts it (``--hf-overrides`` for the scenario's ``--rope-scaling``,
``--kv-cache-memory-bytes`` spelled out: what ``check --fix`` writes for the scenario's script),
with the CPU tier the issue walked (240 GiB, ``cpu_bytes_to_use`` 257,698,037,760).
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, SCENARIOS

HOST_ROOT = ROOT / "tests" / "fixtures" / "host" / "roots" / "two_numa_4x4090"
KINDS = ("script", "config", "deployment", "compose", "helm")

_TIER = ('{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":'
         '{"cpu_bytes_to_use":257698037760,"eviction_policy":"arc","offload_prompt_only":true,'
         '"n_read_threads":16,"n_write_threads":4}}')
_YARN = '{"rope_scaling":{"rope_type":"yarn","factor":3.0,"original_max_position_embeddings":262144}}'

# name: (model as the launch names it, [(flag, value or None)], env, vLLM release, --model/--gpu options, GPUs,
#        host RAM of the machine in GiB)
SCENARIOS_17 = {
    "s1": ("/models/qwen-1m",
           [("--max-model-len", "1048576"), ("--max-num-batched-tokens", "1048576"), ("--max-num-seqs", "1"),
            ("--enable-prefix-caching", None), ("--gpu-memory-utilization", "0.9"), ("--enforce-eager", None)],
           {}, "0.33.0", ["--model", str(SCENARIOS / "s1" / "model"), "--gpu", "A100-80GB"], 1, 128),
    "s2": ("codellama/CodeLlama-13b-Instruct-hf",
           [("--tensor-parallel-size", "8"), ("--gpu-memory-utilization", "0.8"), ("--max-model-len", "8192")],
           {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, "0.6.6", ["--gpu", "RTX-3090"], 8, 128),
    "s3": ("/data/models/qwen3-27b-w4a16",
           [("--served-model-name", "qwen3-27b"), ("--tensor-parallel-size", "4"), ("--max-model-len", "750000"),
            ("--gpu-memory-utilization", "0.85"), ("--kv-cache-dtype", "fp8_e4m3"),
            ("--kv-cache-memory-bytes", "10737418240"), ("--enable-prefix-caching", None),
            ("--enable-chunked-prefill", None), ("--max-num-batched-tokens", "8192"), ("--max-num-seqs", "96"),
            ("--no-scheduler-reserve-full-isl", None), ("--kv-transfer-config", _TIER),
            ("--speculative-config", '{"method":"mtp","num_speculative_tokens":3}'), ("--hf-overrides", _YARN),
            ("--compilation-config", '{"cudagraph_mode":"PIECEWISE"}'), ("--disable-custom-all-reduce", None)],
           {}, "0.33.0", ["--model", str(SCENARIOS / "s3" / "model"), "--gpu", "RTX-4090"], 4, 256),
}


def _argv(flags) -> list[str]:
    return [w for flag, value in flags for w in ((flag,) if value is None else (flag, value))]


def _script(model, flags, env, version) -> str:
    lines = ["#!/bin/bash", "# the launch as a start_api.sh"] + [f"export {k}={v}" for k, v in env.items()]
    body = [f"vllm serve {model}"] + [f"  {flag}" if value is None else f"  {flag} {shlex.quote(value)}"
                                      for flag, value in flags]
    return "\n".join(lines + [" \\\n".join(body)]) + "\n"


def _config(model, flags, env, version) -> str:
    doc = {"model": model}
    for flag, value in flags:
        doc[flag[2:]] = True if value is None else value
    return "# vllm serve --config serve.yaml\n" + yaml.safe_dump(doc, sort_keys=False)


def _container(model, flags, env, version, gpus) -> dict:
    return {"name": "vllm", "image": f"vllm/vllm-openai:v{version}", "args": [model, *_argv(flags)],
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}


def _deployment(model, flags, env, version, gpus) -> str:
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm"},
           "spec": {"template": {"spec": {"containers": [_container(model, flags, env, version, gpus)]}}}}
    return yaml.safe_dump(doc, sort_keys=False)


def _compose(model, flags, env, version, gpus) -> str:
    svc = {"image": f"vllm/vllm-openai:v{version}", "command": [model, *_argv(flags)],
           "deploy": {"resources": {"reservations": {"devices": [{"driver": "nvidia", "count": gpus,
                                                                  "capabilities": ["gpu"]}]}}}}
    if env:
        svc["environment"] = dict(env)
    return yaml.safe_dump({"services": {"vllm": svc}}, sort_keys=False)


def _helm(model, flags, env, version, gpus) -> str:
    config_keys = {"--max-model-len": "maxModelLen", "--gpu-memory-utilization": "gpuMemoryUtilization",
                   "--tensor-parallel-size": "tensorParallelSize"}
    vllm_config: dict = {}
    extra: list[str] = []
    for flag, value in flags:
        if flag in config_keys:
            vllm_config[config_keys[flag]] = float(value) if "." in value else int(value)
        else:
            extra += [flag] if value is None else [flag, value]
    vllm_config["extraArgs"] = extra
    spec = {"name": "main", "repository": "vllm/vllm-openai", "tag": f"v{version}", "modelURL": model,
            "requestGPU": gpus, "vllmConfig": vllm_config}
    if env:
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return yaml.safe_dump({"servingEngineSpec": {"modelSpec": [spec]}}, sort_keys=False)


FILES = {"script": "start_api.sh", "config": "serve.yaml", "deployment": "deploy.yaml",
         "compose": "docker-compose.yaml", "helm": "values.yaml"}


def _write(tmp: Path, kind: str, name: str) -> Path:
    model, flags, env, version, _, gpus, _ = SCENARIOS_17[name]
    if kind == "script":
        text = _script(model, flags, env, version)
    elif kind == "config":
        text = _config(model, flags, env, version)
    else:
        text = {"deployment": _deployment, "compose": _compose, "helm": _helm}[kind](model, flags, env, version, gpus)
    path = tmp / FILES[kind]
    path.write_text(text)
    return path


def _run(*argv, rc=(0, 1)) -> str:
    """The real CLI entry point (``oomguard.cli.main.main``, what the console script runs), in this process:
    ~90 commands here, and a subprocess each would cost a minute of interpreter start-up in CI."""
    from oomguard.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    assert code in rc, (argv, code, err.getvalue()[-2000:])
    return out.getvalue()


def _json(*argv, rc=(0, 1)) -> dict:
    return json.loads(_run(*argv, "--format", "json", rc=rc))


def _flags(launch: dict) -> dict:
    return {k: v["value"] for k, v in launch["flags"].items()}


def _serious(check: dict) -> set[str]:
    return {f["rule"] for f in check["findings"] if f["severity"] in ("error", "warning")}


@pytest.fixture(scope="module", params=sorted(SCENARIOS_17))
def scenario(request, tmp_path_factory):
    """Everything every command printed for one scenario, per form."""
    name = request.param
    _, _, _, version, opts, _, ram = SCENARIOS_17[name]
    seen = {}
    for kind in KINDS:
        d = tmp_path_factory.mktemp(f"{name}-{kind}")
        path = _write(d, kind, name)
        ver = ["--vllm-version", version] if kind in ("script", "config") else []  # manifests: the image tag
        ram_opt = ["--host-ram-gib", str(ram)]
        out = {"path": path}
        out["plan"] = _json("plan", path, *opts, *ver)
        out["check"] = _json("check", path, *opts, *ver, *ram_opt)
        out["fit"] = _json("fit", "--from", path, *opts, *ver, *ram_opt, "--top", "1")
        out["host"] = _json("host", "--launch", path, *ver, *ram_opt, "--root", HOST_ROOT)
        exported = d / "exported.yaml"
        _run("export", "launch", path, "--to", "kubernetes", *opts, *ver, "-o", exported, rc=(0,))
        out["export_plan"] = _json("plan", exported, *opts)
        out["export_check"] = _json("check", exported, *opts)
        seen[kind] = out
    return name, seen


def _numbers(plan: dict) -> tuple:
    return (plan["kv_cache_tokens"], plan["max_concurrency"], plan["starts"], plan["failure"],
            plan["max_model_len"], plan["vllm_version"], plan["tensor_parallel_size"])


def test_every_command_gives_the_same_numbers_for_each_form(scenario):
    name, seen = scenario
    _, flags, _, version, _, gpus, _ = SCENARIOS_17[name]
    for kind, s in seen.items():
        plan, check, fit, host = s["plan"], s["check"], s["fit"], s["host"]
        where = (name, kind)
        assert plan["vllm_version"] == version and plan["tensor_parallel_size"] * plan["pipeline_parallel_size"] == gpus
        # check plans the launch it read, the same way plan does
        assert _numbers(check["plan"]) == _numbers(plan), where
        assert check["launch"]["read"]["flags"] == plan["launch"]["flags"], where
        assert check["vllm_version"] == version, where
        # fit --from starts from the same launch, with the same verdict and pool
        launch = fit["launch"]
        assert (launch["memory_plan_starts"], launch["failure"], launch["kv_cache_tokens"]) == \
            (plan["starts"], plan["failure"], plan["kv_cache_tokens"]), where
        assert round(launch["max_concurrency"], 2) == round(plan["max_concurrency"], 2), where
        assert fit["goal"]["max_model_len"] == plan["max_model_len"] and fit["goal"]["vllm_version"] == version, where
        # host reads the same launch and gives check's host-RAM answer
        view = host["facts"]["launch"]
        assert view["vllm_version"] == version and view["tensor_parallel_size"] == plan["tensor_parallel_size"], where
        assert view["gpu_memory_utilization"] == plan["gpu_memory_utilization"], where
        assert host["host_ram"] == check["host_ram"], where
        # the export holds the same launch: read back, it plans to the same numbers
        again = s["export_plan"]
        assert _flags(again["launch"]) == _flags(plan["launch"]), where
        assert _numbers(again) == _numbers(plan), where
        assert _numbers(s["export_check"]["plan"]) == _numbers(plan), where
        # what the export adds (memory request, /dev/shm) leaves check nothing about host RAM or /dev/shm
        assert not _serious(s["export_check"]) & {"OG401", "OG405"}, (where, s["export_check"]["findings"])


def test_the_five_forms_are_one_launch(scenario):
    name, seen = scenario
    numbers = {kind: _numbers(s["plan"]) for kind, s in seen.items()}
    assert len(set(numbers.values())) == 1, numbers
    flags = {kind: _flags(s["plan"]["launch"]) for kind, s in seen.items()}
    if "enable_prefix_caching" not in flags["script"]:
        # the chart writes --no-enable-prefix-caching when vllmConfig leaves it unset (deployment-vllm-multi.yaml)
        assert flags["helm"].pop("enable_prefix_caching") is False
    assert all(f == flags["script"] for f in flags.values()), flags
    # check's verdict and its first goal-keeping edit, fit's first launch and host's RAM answer do not depend
    # on the form
    first = {kind: (s["check"]["goal_fixes"][0]["edits"] if s["check"]["goal_fixes"] else None)
             for kind, s in seen.items()}
    assert all(f == first["script"] for f in first.values()), first
    fit_first = {kind: (s["fit"]["candidates"][0]["flags"] if s["fit"]["candidates"] else None,
                        s["fit"]["goal_met"]) for kind, s in seen.items()}
    if fit_first["helm"][0] is not None and "enable_prefix_caching" not in (fit_first["script"][0] or {}):
        fit_first["helm"][0].pop("enable_prefix_caching", None)  # the chart's switch, as above
    diff = {kind: {k: v for k, v in (f[0] or {}).items() if (fit_first["script"][0] or {}).get(k) != v}
            for kind, f in fit_first.items()}
    assert all(f == fit_first["script"] for f in fit_first.values()), diff
    ram = {kind: s["host"]["host_ram"] for kind, s in seen.items()}
    assert all(r == ram["script"] for r in ram.values()), ram
    errors = {kind: {f["rule"] for f in s["check"]["findings"] if f["severity"] == "error"} for kind, s in seen.items()}
    # a container's /dev/shm is its own (64 MiB by default) and these files size none: a CPU tier there is an
    # error (OG405) where a script on the host is told to check the machine's (info)
    shm = {kind for kind, e in errors.items() if "OG405" in e}
    assert shm == ({"deployment", "compose", "helm"} if name == "s3" else set()), errors
    assert all(e - {"OG405"} == errors["script"] for e in errors.values()), errors


def test_the_scenarios_say_what_the_issue_walked(scenario):
    """The numbers themselves, so that agreeing on a wrong answer fails too."""
    name, seen = scenario
    s = seen["script"]
    plan, check, fit, host = s["plan"], s["check"], s["fit"], s["host"]
    if name == "s1":
        assert plan["failure"] == "profile-oom" and check["goal_kept"] is True
        assert fit["candidates"][0]["plan"]["max_model_len"] == 1_048_576
    elif name == "s2":
        assert plan["starts"] and "OG103" in _serious(check)  # V0 0.6.6: no chunked prefill by default
    else:
        assert plan["kv_cache_tokens"] == 327_680  # 10 GiB per GPU / 32,768 B per token per GPU
        # 240 GiB of CPU tier on a 256 GiB host: check, fit and host all say it does not fit, and propose 201 GiB
        assert check["host_ram"]["parts"]["kv_cpu_tier"] == 240.0 and check["host_ram"]["needed_gib"] > 256
        assert "OG401" in {f["rule"] for f in check["findings"]}
        assert "HOST010" in {f["id"] for f in host["findings"]}
        tier = fit["cpu_tier"]
        assert tier["host_status"] and "not" in tier["host_status"].lower() or tier["host_need_bytes"] > 256 << 30
        assert tier["largest_fit_bytes"] // (1 << 30) == 201
