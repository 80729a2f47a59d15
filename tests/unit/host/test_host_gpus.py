"""GPU processes from nvidia-smi CSV files, a recorded NVML stand-in and an injected nvidia-smi runner.

Real NVML was not exercised: this machine has no NVIDIA driver. The NVML test
drives ``NvmlSource`` with a stand-in module that returns values recorded from
pynvml on an H100 host (same call names and return shapes as nvidia-ml-py 12).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from oomguard.errors import InputError
from oomguard.host.gpus import NvidiaSmiSource, NvmlSource, parse_nvidia_smi_csv
from oomguard.units import GiB, MiB

from host_paths import GPUS


def test_csv_shared_a100():
    snap = parse_nvidia_smi_csv((GPUS / "a100_shared.csv").read_text(), "a100_shared.csv")
    (dev,) = snap.devices
    assert dev.index == 0 and dev.name == "NVIDIA A100-SXM4-80GB"
    assert dev.total_bytes == 80 * GiB
    assert dev.used_bytes == 10767 * MiB
    assert dev.free_bytes == (81920 - 10767) * MiB
    assert [(p.pid, p.gpu_index, p.used_bytes) for p in snap.processes] == [(3187, 0, 10 * GiB), (2210, 0, 512 * MiB)]


def test_csv_container_hides_process_memory():
    snap = parse_nvidia_smi_csv((GPUS / "container_no_pids.csv").read_text())
    assert len(snap.devices) == 2
    (proc,) = snap.processes
    assert proc.used_bytes is None and proc.gpu_index == 0
    assert snap.processes_on(1) == []


def test_csv_without_header_is_rejected_with_how_to():
    with pytest.raises(InputError, match=r"gpus.csv:1: no CSV header line"):
        parse_nvidia_smi_csv("0, GPU-x, A100, 81920 MiB, 3 MiB\n", "gpus.csv")


def test_csv_bad_values():
    text = "index, uuid, name, memory.total [MiB], memory.used [MiB]\n0, GPU-x, A100, lots, 3 MiB\n"
    with pytest.raises(InputError, match=r"f:2: not a MiB value"):
        parse_nvidia_smi_csv(text, "f")
    with pytest.raises(InputError, match="no GPU or process rows"):
        parse_nvidia_smi_csv("\n\n", "f")


class RecordedNvml:
    """pynvml stand-in with values recorded on a 2 x H100 80GB host (one vLLM server on GPU0)."""

    def __init__(self):
        self.calls: list[str] = []
        self._devices = [
            (b"GPU-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a", b"NVIDIA H100 80GB HBM3", 85520809984, 76907675648,
             [SimpleNamespace(pid=18801, usedGpuMemory=76369625088)]),
            ("GPU-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1b", "NVIDIA H100 80GB HBM3", 85520809984, 538771456, []),
        ]

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return len(self._devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=self._devices[h][2], used=self._devices[h][3], free=self._devices[h][2] - self._devices[h][3])

    def nvmlDeviceGetUUID(self, h):
        return self._devices[h][0]

    def nvmlDeviceGetName(self, h):
        return self._devices[h][1]

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return self._devices[h][4]

    def nvmlSystemGetProcessName(self, pid):
        return b"python3"


def test_nvml_source_with_recorded_values():
    nv = RecordedNvml()
    snap = NvmlSource(module=nv).snapshot()
    assert nv.calls == ["init", "shutdown"]
    assert snap.source == "nvml"
    assert [d.uuid for d in snap.devices][0] == "GPU-9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"  # bytes decoded
    assert snap.devices[1].used_bytes == 538771456
    (proc,) = snap.processes
    assert (proc.pid, proc.gpu_index, proc.name) == (18801, 0, "python3")
    assert proc.used_bytes == 76369625088


def test_nvml_shuts_down_on_error():
    nv = RecordedNvml()
    nv.nvmlDeviceGetMemoryInfo = lambda h: (_ for _ in ()).throw(RuntimeError("NVML_ERROR_GPU_IS_LOST"))
    with pytest.raises(RuntimeError):
        NvmlSource(module=nv).snapshot()
    assert nv.calls == ["init", "shutdown"]


def test_nvidia_smi_source_runs_the_two_queries():
    seen = []

    def runner(argv):
        seen.append(argv)
        return (GPUS / "a100_shared.csv").read_text().split("gpu_uuid")[0] if "--query-gpu" in argv[1] else (
            "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
            "GPU-5d3c2a1b-8e7f-4a6b-9c0d-1e2f3a4b5c6d, 3187, /usr/bin/python3, 10240 MiB\n"
        )

    snap = NvidiaSmiSource(runner=runner).snapshot()
    assert seen[0][1].startswith("--query-gpu=index,uuid,name,memory.total,memory.used")
    assert seen[1][1].startswith("--query-compute-apps=")
    assert snap.source == "nvidia-smi"
    assert snap.processes[0].gpu_index == 0


def test_csv_series_is_kept_as_one_entry_per_gpu_and_process():
    """`nvidia-smi --query-gpu=... -l 1` repeats every GPU each sample: the device keeps its last
    row (the state now), the peak and the count; processes repeat too and are kept once."""
    rows = ["index, uuid, name, memory.total [MiB], memory.used [MiB]"]
    for used in (100, 5000, 300):
        rows += [f"0, GPU-a, H100, 81559 MiB, {used} MiB", f"1, GPU-b, H100, 81559 MiB, {used + 1} MiB"]
    rows += ["gpu_uuid, pid, process_name, used_gpu_memory [MiB]"]
    rows += ["GPU-a, 42, python3, 200 MiB", "GPU-a, 42, python3, 4000 MiB", "GPU-b, 43, python3, [N/A]"]
    snap = parse_nvidia_smi_csv(iter(enumerate(rows, start=1)), "series.csv")  # a streamed file's lines
    assert [(d.index, d.used_bytes, d.peak_used_bytes, d.samples) for d in snap.devices] == [
        (0, 300 * MiB, 5000 * MiB, 3), (1, 301 * MiB, 5001 * MiB, 3)]
    assert [(p.pid, p.gpu_index, p.used_bytes) for p in snap.processes] == [(42, 0, 4000 * MiB), (43, 1, None)]
    assert snap.to_dict()["devices"][0]["peak_used_bytes"] == 5000 * MiB


@pytest.mark.parametrize("cell, needle", [
    ("9" * 5000 + " MiB", "too many digits"), ("nan MiB", "finite"), ("1e999 MiB", "infinity"),
    ("١٢٣ MiB", "ASCII"), ("99999999999 MiB", "at most"), ("0 MiB", "missing or 0"),
])
def test_csv_hostile_memory_cells_are_one_line_errors(cell, needle):
    text = f"index, uuid, name, memory.total [MiB], memory.used [MiB]\n0, GPU-x, A100, {cell}, 3 MiB\n"
    with pytest.raises(InputError, match=needle):
        parse_nvidia_smi_csv(text, "f")


def test_csv_hostile_index_and_pid():
    with pytest.raises(InputError, match="f:2: not a GPU index"):
        parse_nvidia_smi_csv("index, uuid, name, memory.total [MiB], memory.used [MiB]\n" + "9" * 5000
                             + ", GPU-x, A100, 1 MiB, 1 MiB\n", "f")
    with pytest.raises(InputError, match="f:2: not a pid"):
        parse_nvidia_smi_csv("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\nGPU-x, 1e9, p, 1 MiB\n", "f")
