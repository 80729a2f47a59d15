"""Several vLLM servers on one GPU set, through the real CLI on a real compose file, and the planner's per-release rules."""

from __future__ import annotations

import json

import pytest

from oomguard.inputs.hardware import lookup_gpu, mig_profiles
from oomguard.inputs.model_config import load_model
from oomguard.plan.shared_gpu import Server, footprint, plan_shared
from oomguard.units import GiB
from tests.conftest import ROOT, run_cli

COMPOSE = str(ROOT / "tests" / "fixtures" / "shared-gpu" / "two-services.yaml")


def _servers(version: str, u1: float = 0.7, u2: float = 0.3):
    return [Server("chat", load_model("Qwen/Qwen3-8B"), {"max_model_len": 32768, "gpu_memory_utilization": u1}, {}, version),
            Server("helper", load_model("Qwen/Qwen3-0.6B"), {"max_model_len": 8192, "gpu_memory_utilization": u2}, {}, version)]


def test_compose_with_two_services_on_one_gpu_names_the_server_that_fails_and_a_split_that_works():
    out = run_cli("plan", COMPOSE, "--gpu", "A100-80GB", "--format", "json")
    assert out.returncode == 1, out.stderr
    d = json.loads(out.stdout)
    (sp,) = d["shared_gpu"]
    assert sp["start_order"] == ["chat", "helper"]
    chat, helper = sp["servers"]
    assert chat["starts"] and not helper["starts"]
    assert helper["failure"] == "startup-free-memory" and "Free memory on device" in helper["error"]
    # what the second server meets at start: the first one's peak footprint
    assert helper["others_at_start_gib"] == chat["footprint_gib"]
    assert helper["free_at_start_gib"] < helper["requested_gib"]
    kinds = {o["kind"]: o for o in sp["options"]}
    assert set(kinds) >= {"pinned", "utilization", "mig"}
    for kind in ("pinned", "utilization", "mig"):
        opt = kinds[kind]
        assert opt["ok"], kind
        assert all(s["plan"]["starts"] for s in opt["servers"])
    pinned = kinds["pinned"]["servers"]
    assert all(s["edits"]["kv_cache_memory_bytes"] % (256 << 20) == 0 for s in pinned)
    assert kinds["pinned"]["headroom_gib"] >= sp["headroom_floor_gib"]
    assert [s["gpu"] for s in kinds["mig"]["servers"]] == ["A100-SXM4-80GB MIG 3g.40gb", "A100-SXM4-80GB MIG 1g.20gb"]


@pytest.mark.parametrize("kind", ["utilization", "pinned"])
def test_the_split_passes_plan_and_check_when_written_back(tmp_path, kind):
    d = json.loads(run_cli("plan", COMPOSE, "--gpu", "A100-80GB", "--format", "json").stdout)
    opt = next(o for o in d["shared_gpu"][0]["options"] if o["kind"] == kind)

    def flags(e):
        pinned = f', "--kv-cache-memory-bytes", "{e["kv_cache_memory_bytes"]}"' if e.get("kv_cache_memory_bytes") else ""
        return f'"--gpu-memory-utilization", "{e["gpu_memory_utilization"]}"{pinned}'

    e = [s["edits"] for s in opt["servers"]]
    text = open(COMPOSE).read().replace('"--gpu-memory-utilization", "0.7"', flags(e[0])) \
        .replace('"--gpu-memory-utilization", "0.3"', flags(e[1]))
    fixed = tmp_path / "compose.yaml"
    fixed.write_text(text)
    out = run_cli("plan", str(fixed), "--gpu", "A100-80GB", "--format", "json")
    assert out.returncode == 0, out.stdout
    assert json.loads(out.stdout)["shared_gpu"][0]["ok"]
    chk = run_cli("check", str(fixed), "--gpu", "A100-80GB")
    assert chk.returncode == 0, chk.stdout
    assert "FITS" in chk.stdout


def test_check_reports_the_shared_failure_as_a_finding():
    out = run_cli("check", COMPOSE, "--gpu", "A100-80GB")
    assert out.returncode == 1
    assert "helper fails at start" in out.stdout and "Splits that let every server start" in out.stdout
    j = json.loads(run_cli("check", COMPOSE, "--gpu", "A100-80GB", "--format", "json").stdout)
    assert j["shared_gpu"][0]["ok"] is False


def test_same_gpu_scripts_in_start_order(tmp_path):
    a = tmp_path / "chat.sh"
    b = tmp_path / "helper.sh"
    a.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 32768 --gpu-memory-utilization 0.5\n")
    b.write_text("vllm serve Qwen/Qwen3-0.6B --max-model-len 8192 --gpu-memory-utilization 0.3\n")
    out = run_cli("plan", str(a), "--same-gpu", str(b), "--gpu", "A100-80GB", "--vllm-version", "0.11.0", "--format", "json")
    assert out.returncode == 0, out.stdout
    sp = json.loads(out.stdout)["shared_gpu"][0]
    assert [s["name"] for s in sp["servers"]] == ["chat.sh", "helper.sh"] and sp["ok"]  # named by their files
    # the other order: the same two fit (each passes its check with the other at its peak)
    out = run_cli("plan", str(b), "--same-gpu", str(a), "--gpu", "A100-80GB", "--vllm-version", "0.11.0", "--format", "json")
    assert json.loads(out.stdout)["shared_gpu"][0]["ok"]


@pytest.mark.parametrize("old", ["0.8.5", "0.9.0"])
def test_before_0_9_1_the_running_servers_are_charged_to_the_next_budget(old):
    gpu = lookup_gpu("A100-80GB")
    sp = plan_shared(_servers(old), gpu, propose=False)
    chat, helper = sp.outcomes
    # no start check before 0.9.1, but the helper's budget (0.3 × total) already holds the chat server: no KV left
    assert helper.plan.failure.value == "no-kv-memory"
    assert helper.plan.tight_rank.non_torch.bytes > chat.footprint_bytes


@pytest.mark.parametrize("new", ["0.9.1", "0.10.0", "0.11.0"])
def test_from_0_9_1_the_same_pair_fails_the_free_memory_check_at_start(new):
    # v1/worker/gpu_worker.py::init_device takes its snapshot and checks free >= total × util from 0.9.1
    sp = plan_shared(_servers(new), lookup_gpu("A100-80GB"), propose=False)
    assert sp.outcomes[1].plan.failure.value == "startup-free-memory"


def test_utilization_split_of_an_old_release_counts_the_earlier_servers():
    gpu = lookup_gpu("A100-80GB")
    sp = plan_shared(_servers("0.8.5"), gpu)
    util = next(o for o in sp.options if o.kind == "utilization")
    assert util.ok
    u1, u2 = (e["gpu_memory_utilization"] for e in util.edits)
    assert u2 > u1  # the second share includes the first server (0.8.5 charges it to the budget)
    assert not any(o.kind == "pinned" for o in sp.options)  # --kv-cache-memory-bytes does not exist in 0.8.5


def test_a_start_that_passes_only_while_the_first_server_is_idle_is_flagged():
    gpu = lookup_gpu("A100-80GB")
    sp = plan_shared(_servers("0.11.0", 0.7, 0.28), gpu, propose=False)
    chat, helper = sp.outcomes
    # idle, the chat server holds its peak less its activation (returned to the driver after profiling);
    # after one long prompt PyTorch's cache keeps that memory, and the helper's check fails
    assert helper.others_idle_bytes == chat.idle_bytes < helper.others_peak_bytes == chat.footprint_bytes
    assert not helper.starts and helper.starts_if_idle
    assert any("starts only while the servers before it have not served" in n for n in sp.notes)


def test_footprint_is_the_servers_own_bytes_whatever_the_release_charges():
    gpu = lookup_gpu("A100-80GB")
    from oomguard.model.planner import plan_launch

    m = load_model("Qwen/Qwen3-0.6B")
    for v in ("0.6.6", "0.8.5", "0.11.0", "0.32.0"):
        alone = footprint(plan_launch(m, gpu, {"max_model_len": 8192, "gpu_memory_utilization": 0.9}, version=v))[0]
        beside = footprint(plan_launch(m, gpu, {"max_model_len": 8192, "gpu_memory_utilization": 0.9}, version=v,
                                       other_gpu_use_bytes=10 * GiB))[0]
        # other processes never count as this server's memory (its own KV shrinks where the release charges them)
        assert beside <= alone + GiB // 100, v


def test_mig_profiles_are_gpus_of_their_own_size():
    g = lookup_gpu("A100-80GB MIG 3g.40gb")
    card = lookup_gpu("A100-80GB")
    assert g.total_bytes == card.total_bytes // 2 and g.interconnect == "none"
    assert lookup_gpu("H100:1g.10gb").total_bytes == lookup_gpu("H100").total_bytes // 8
    assert [p.name for p in mig_profiles(lookup_gpu("A30"))] == ["1g.6gb", "2g.12gb", "4g.24gb"]
    out = run_cli("plan", "--model", "Qwen/Qwen3-0.6B", "--gpu", "A100-80GB MIG 1g.10gb", "--max-model-len", "8192", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["gpu"]["total_gib"] == pytest.approx(79.15 / 8, abs=0.01)
    bad = run_cli("plan", "--model", "Qwen/Qwen3-0.6B", "--gpu", "L40S:1g.10gb")
    assert bad.returncode == 2 and "no MIG profile" in bad.stderr


def test_fit_splits_one_gpu_between_models():
    out = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--context", "32768", "--same-gpu", "Qwen/Qwen3-0.6B@8192",
                  "--gpu", "H100", "--format", "json")
    assert out.returncode == 0, out.stderr
    sp = json.loads(out.stdout)["shared_gpu"]
    pinned = next(o for o in sp["options"] if o["kind"] == "pinned")
    assert pinned["ok"]
    # each server holds about the same multiple of its own max-length request
    c = [s["plan"]["max_concurrency"] for s in pinned["servers"]]
    assert max(c) / min(c) < 1.3
    bad = run_cli("fit", "--model", "Qwen/Qwen3-8B", "--same-gpu", "Qwen/Qwen3-0.6B@lots", "--gpu", "H100")
    assert bad.returncode == 2 and "not a token count" in bad.stderr


def test_pods_pinned_to_one_nodes_gpu_are_one_gpu_set_and_other_nodes_are_not(tmp_path):
    pods = ROOT / "tests" / "fixtures" / "shared-gpu" / "two-pods.yaml"
    out = run_cli("plan", str(pods), "--gpu", "A100-80GB", "--format", "json")
    assert out.returncode == 1, out.stderr
    (sp,) = json.loads(out.stdout)["shared_gpu"]
    assert [s["name"] for s in sp["servers"]] == ["Pod chat/vllm", "Pod embed/vllm"]
    assert sp["servers"][1]["failure"] == "startup-free-memory"
    # the same pods on two nodes share nothing: each is planned alone and both start
    apart = tmp_path / "apart.yaml"
    apart.write_text(pods.read_text().replace("nodeName: gpu-node-1", "nodeName: gpu-node-2", 1)
                     .replace("nodeName: gpu-node-1", "nodeName: gpu-node-1"))
    out = run_cli("plan", str(apart), "--gpu", "A100-80GB", "--format", "json")
    assert out.returncode == 0, out.stdout[-1500:]
    assert "shared_gpu" not in out.stdout
