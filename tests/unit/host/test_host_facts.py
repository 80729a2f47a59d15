"""read_host_facts on whole fake trees: what is read, what is noted, what is never queried."""

from __future__ import annotations

import json

import pytest

from oomguard.errors import InputError
from oomguard.host.cgroup import ContainerKind
from oomguard.host.facts import read_host_facts, redact_argv
from oomguard.units import GiB, MiB

from host_paths import GPUS, ROOTS, TOPO


def test_bad_kernel_settings_tree():
    f = read_host_facts(ROOTS / "bad_kernel_settings")
    assert f.overcommit_memory == 2 and f.max_map_count == 65530
    assert f.swap_total_bytes == 8388604 * 1024
    assert f.shm.size_bytes == 64 * MiB and f.shm.source == "/proc/mounts"
    assert (f.nofile_soft, f.nofile_hard) == (1024, 4096)
    assert [n.node for n in f.numa_nodes] == [0, 1]
    assert f.numa_nodes[1].mem_total_bytes == 126 * GiB
    assert 40 in f.numa_nodes[1].cpus
    # GPUs are never queried for a fake root: the real machine's GPUs would leak in.
    assert f.gpus is None and any("--nvidia-smi" in n for n in f.notes)
    assert f.topology is None


def test_vllm_processes_found_and_secrets_redacted():
    f = read_host_facts(ROOTS / "bad_kernel_settings")
    assert [(p.pid, p.oom_score_adj) for p in f.vllm_processes] == [(4242, 0), (4300, -1000)]
    dumped = json.dumps(f.to_dict())
    assert "sk-secret-do-not-print" not in dumped
    assert "--api-key ***" in f.vllm_processes[0].cmdline


def test_redact_argv_forms():
    assert redact_argv(["vllm", "--api-key=abc", "--hf-token", "t", "--port", "1"]) == "vllm --api-key=*** --hf-token *** --port 1"


def test_budget_is_capped_by_the_cgroup():
    f = read_host_facts(ROOTS / "docker_cgroup_v2_limited")
    assert f.meminfo.mem_available_bytes == 470 * GiB
    assert f.ram_budget_bytes == 64 * GiB
    assert f.container is ContainerKind.DOCKER
    assert f.shm.size_bytes == 64 * MiB


def test_shm_default_is_half_of_ram():
    f = read_host_facts(ROOTS / "two_numa_4x4090")
    assert f.shm.size_bytes == f.meminfo.mem_total_bytes // 2


def test_files_for_gpus_and_topology():
    f = read_host_facts(
        ROOTS / "two_numa_4x4090",
        topo_file=str(TOPO / "rtx4090_4x_two_sockets.txt"),
        nvidia_smi_file=str(GPUS / "rtx4090_4x_idle.csv"),
    )
    assert len(f.gpus.devices) == 4 and f.gpus.source.endswith("rtx4090_4x_idle.csv")
    assert f.topology.gpus == (0, 1, 2, 3)
    d = f.to_dict()
    assert d["topology"]["matrix"]["GPU1"]["GPU3"] == "SYS"
    assert d["gpus"]["devices"][0]["total_bytes"] == 24564 * MiB


def test_missing_optional_files_become_notes(fake_root):
    r = fake_root("two_numa_4x4090").remove("proc/self/limits").remove("proc/mounts").remove("proc/sys/vm/max_map_count")
    f = read_host_facts(r.path)
    assert f.nofile_hard is None and f.shm.size_bytes is None and f.max_map_count is None
    assert any("limits" in n for n in f.notes)
    assert any("max_map_count" in n for n in f.notes)


def test_missing_meminfo_is_bad_input(fake_root):
    r = fake_root("two_numa_4x4090").remove("proc/meminfo")
    with pytest.raises(InputError, match="meminfo"):
        read_host_facts(r.path)


def test_garbage_sysctl_names_file(fake_root):
    r = fake_root("two_numa_4x4090").write("proc/sys/vm/overcommit_memory", "always\n")
    with pytest.raises(InputError, match=r"overcommit_memory:1: expected an integer"):
        read_host_facts(r.path)


def test_unreadable_topo_file(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        read_host_facts(ROOTS / "two_numa_4x4090", topo_file=str(tmp_path / "nope.txt"))


def test_real_root_reads_without_error():
    # This machine: no GPU tools, but /proc and rlimits must read cleanly.
    f = read_host_facts("/")
    assert f.meminfo.mem_total_bytes > 0
    assert f.shm.source in ("statvfs", "absent")
    assert json.dumps(f.to_dict())


def _real_root_with_tools(monkeypatch, runner, nvml=False):
    from oomguard.host import gpus

    monkeypatch.setattr(gpus.NvmlSource, "available", classmethod(lambda cls: nvml))
    monkeypatch.setattr(gpus.NvidiaSmiSource, "available", staticmethod(lambda: True))
    monkeypatch.setattr(gpus, "_run", runner)


def test_real_root_runs_nvidia_smi_when_present(monkeypatch):
    # nvidia-smi is absent here: the runner replays recorded outputs of the three queries.
    def runner(argv):
        if argv[1] == "topo":
            return (TOPO / "rtx4090_4x_two_sockets.txt").read_text()
        text = (GPUS / "rtx4090_4x_idle.csv").read_text()
        head, _, apps = text.partition("gpu_uuid")
        return head if argv[1].startswith("--query-gpu") else "gpu_uuid" + apps

    _real_root_with_tools(monkeypatch, runner)
    f = read_host_facts("/")
    assert f.gpus.source == "nvidia-smi" and len(f.gpus.devices) == 4
    assert f.topology.link(0, 2).kind.value == "SYS"


def test_real_root_nvidia_smi_failure_is_a_note(monkeypatch):
    def runner(argv):
        raise RuntimeError("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")

    _real_root_with_tools(monkeypatch, runner)
    f = read_host_facts("/")
    assert f.gpus is None and f.topology is None
    assert any(n.startswith("nvidia-smi failed: NVIDIA-SMI has failed") for n in f.notes)
    assert any(n.startswith("nvidia-smi topo -m failed") for n in f.notes)
