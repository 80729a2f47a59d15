"""Memory samplers: NVML (recorded values), nvidia-smi parsing, /metrics, RSS, kernel log.

Real NVML was NOT exercised: this machine has no NVIDIA driver. The NVML
sampler is tested through ``FakeNvml`` (probe_fakes.py), which answers the
same calls as ``pynvml`` with values recorded on an RTX 3090 host.
"""

from __future__ import annotations

import asyncio
import os
import socket

import pytest
from probe_fakes import RECORDED_3090, FakeNvml

from oomguard.probe.classes import Source
from oomguard.probe.kernel import KernelOomSampler, _KmsgReader, is_oom_line, oom_kill
from oomguard.probe.metrics import parse_metrics
from oomguard.probe.samplers import (
    MemorySampler,
    NvidiaSmiSampler,
    NvmlSampler,
    ProcessTree,
    RssSampler,
    find_server_pid,
    smi_samples,
)

MiB = 1 << 20


def test_nvml_sampler_parses_recorded_values():
    fake = FakeNvml([RECORDED_3090, {**RECORDED_3090, "used": 1 * MiB, "procs": []}])
    sampler = NvmlSampler(fake, server_pids=lambda: {4242, 4243})
    assert isinstance(sampler, MemorySampler)
    assert fake.inited and sampler.gpu_names == ["NVIDIA GeForce RTX 3090"] * 2
    s0, s1 = asyncio.run(sampler.sample(1.5))
    assert (s0.key, s0.source, s0.t) == ("gpu0", Source.NVML, 1.5)
    assert s0.values["used_bytes"] == 21045116928 and s0.values["total_bytes"] == 25769803776
    assert s0.values["free_bytes"] == 25769803776 - 21045116928
    assert s0.values["util_pct"] == 87
    assert s0.values["server_bytes"] == 20552089600  # only the server's pid, not pid 999
    assert s1.values["server_bytes"] == 0
    asyncio.run(sampler.close())
    assert fake.shutdown


def test_nvml_sampler_tolerates_unsupported_utilization():
    sampler = NvmlSampler(FakeNvml([RECORDED_3090], fail_util=True))
    (s,) = sampler.sample_sync(0.0)
    assert "util_pct" not in s.values and "server_bytes" not in s.values


def test_nvml_create_reports_why_not():
    sampler, why = NvmlSampler.create()
    if sampler is None:  # the normal case here: no nvidia-ml-py or no driver
        assert "nvidia-ml-py" in why or "NVML" in why


SMI = """0, 19876, 24576, 87
1, 20012, 24576, 91
2, [N/A], 24576, [N/A]
garbage line
"""


def test_smi_samples_through_the_one_reader():
    rows = smi_samples(1.0, SMI)
    assert [s.key for s in rows] == ["gpu0", "gpu1", "gpu2"]
    assert rows[0].values == {"used_bytes": 19876 * MiB, "total_bytes": 24576 * MiB, "util_pct": 87.0,
                              "free_bytes": 4700 * MiB}
    assert rows[2].values == {"total_bytes": 24576 * MiB}  # [N/A] is not a reading
    assert {s.source for s in rows} == {Source.NVIDIA_SMI}


def test_smi_samples_real_shapes():
    # An H100 with MIG enabled (utilization is [N/A] in MIG mode), a board that reports [Not Supported]
    # memory, a driver warning line before the rows, and cells with the spaces nvidia-smi pads them with.
    text = ("WARNING: infoROM is corrupted at gpu 0000:41:00.0\n"
            "0, 40123, 81559, [N/A]\n"
            "1, [Not Supported], [Not Supported], 12\n"
            "  2 ,  512 , 81559 ,  0  \n"
            "3, 99999999999999999999999999, 81559, 5\n"
            "4, 1, 2\n")
    rows = {s.key: s.values for s in smi_samples(0.0, text)}
    assert rows["gpu0"] == {"used_bytes": 40123 * MiB, "total_bytes": 81559 * MiB, "free_bytes": (81559 - 40123) * MiB}
    assert "gpu1" not in rows  # neither memory cell is a reading
    assert rows["gpu2"]["used_bytes"] == 512 * MiB and rows["gpu2"]["util_pct"] == 0
    assert rows["gpu3"] == {"total_bytes": 81559 * MiB, "util_pct": 5.0}  # a hostile figure is not a reading
    assert "gpu4" not in rows  # not the query's four columns


def test_host_and_probe_read_nvidia_smi_with_one_parser():
    import inspect

    import oomguard.host.gpus as host_gpus
    import oomguard.probe.samplers as samplers

    for mod in (samplers, host_gpus):
        src = inspect.getsource(mod)
        assert "NvidiaSmiParser" in src or "read_sampling" in src
        assert ".split(\",\")" not in src  # no CSV splitting of its own


def test_nvidia_smi_sampler_with_recorded_output():
    calls = []

    def fake_run(argv):
        calls.append(argv)
        return SMI

    sampler = NvidiaSmiSampler(run=fake_run)
    out = asyncio.run(sampler.sample(2.0))
    assert [s.key for s in out] == ["gpu0", "gpu1", "gpu2"]
    assert "--query-gpu=index,memory.used,memory.total,utilization.gpu" in calls[0]


METRICS_NEW = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 3.0
vllm:num_requests_running{engine="1",model_name="tiny"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 1.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.42
vllm:kv_cache_usage_perc{engine="1",model_name="tiny"} 0.91
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="tiny"} 4.0
vllm:num_preemptions_created{engine="0",model_name="tiny"} 1.7e9
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="tiny"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 250.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",num_gpu_blocks="1024"} 1.0
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 123.0
"""

METRICS_OLD = """# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.75
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 8.0
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="m"} 12.0
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.5
"""


def test_parse_metrics_new_names_sum_and_max_across_engines():
    r = parse_metrics(METRICS_NEW)
    assert r.values["running"] == 5 and r.values["waiting"] == 1
    assert r.values["kv_cache_usage"] == pytest.approx(0.91)  # the fullest engine
    assert r.values["preemptions_total"] == 4  # _created sample ignored
    assert r.values["prefix_cache_hits_total"] == 250 and r.values["prefix_cache_queries_total"] == 1000
    assert (r.num_gpu_blocks, r.block_size, r.kv_cache_tokens) == (1024, 128, 131072)


def test_parse_metrics_old_names():
    r = parse_metrics(METRICS_OLD)
    assert r.values["kv_cache_usage"] == pytest.approx(0.75)
    assert r.values["running"] == 8 and r.values["preemptions_total"] == 12
    assert r.values["prefix_cache_hit_rate"] == 0.5
    assert r.kv_cache_tokens is None


def test_rss_sampler_on_this_process_and_pid_by_port():
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert find_server_pid(port) == os.getpid()
    tree = ProcessTree(os.getpid())
    assert tree.alive() and os.getpid() in tree.pids()
    (s,) = RssSampler(tree).sample_sync(0.25)
    assert s.source is Source.RSS and s.values["rss_bytes"] > 10 * MiB
    assert s.values["alive"] == 1.0 and 0 < s.values["host_available_bytes"] <= s.values["host_total_bytes"]


KERNEL_LINES = [
    "[ 1234.5] python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
    "[ 1234.6] Out of memory: Killed process 4242 (python) total-vm:98765432kB, anon-rss:60123456kB, file-rss:0kB",
    "[ 1234.7] usb 1-1: new high-speed USB device",
    "[ 1300.0] Memory cgroup out of memory: Killed process 5151 (VLLM::EngineCor) total-vm:1kB",
]


def test_kernel_patterns():
    assert is_oom_line(KERNEL_LINES[0]) and not is_oom_line(KERNEL_LINES[2])
    kill = oom_kill(KERNEL_LINES[3])
    assert (kill.pid, kill.name) == (5151, "VLLM::EngineCor")
    assert oom_kill(KERNEL_LINES[0]) is None


def test_kernel_sampler_with_recorded_lines():
    feed = [KERNEL_LINES[:3], [], KERNEL_LINES[3:]]
    sampler = KernelOomSampler(lambda: feed.pop(0) if feed else [])
    first = sampler.sample_sync(1.0)
    assert len(first) == 2 and first[1].values["killed_pid"] == 4242 and first[1].text.startswith("[ 1234.6]")
    assert sampler.sample_sync(2.0) == []
    assert len(sampler.sample_sync(3.0)) == 1
    assert [k.pid for k in sampler.kills] == [4242, 5151]


def test_kmsg_reader_starts_at_the_end(tmp_path):
    # /dev/kmsg is a character device; a FIFO-less stand-in: a regular file read from its end.
    path = tmp_path / "kmsg"
    path.write_text("6,1,1,-;old line\n")
    reader = _KmsgReader(str(path))
    assert reader() == []
    with open(path, "a") as fh:
        fh.write("3,2,2,-;Out of memory: Killed process 7 (x)\n")
    assert reader() == ["Out of memory: Killed process 7 (x)"]
    reader.close()


def test_kernel_create_never_raises():
    sampler, why = KernelOomSampler.create()
    assert isinstance(why, str) and why
    if sampler is not None:
        asyncio.run(sampler.close())
