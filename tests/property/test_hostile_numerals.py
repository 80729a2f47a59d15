"""Every reader on every kind of hostile numeral, deterministically (issue 20 item 1).

The hypothesis cases in ``test_fuzz_commands.py`` draw numbers at random; this matrix puts each
numeral of ``fuzzlib.MATRIX_NUMERALS`` (huge, past int64 and int()'s digit limit, overflowing a
double, NaN/inf, negative, ``1_000``, ``0x10``, non-ASCII digits ...) into one numeric slot of
each reader, and runs the real command in-process. A run must end with a documented exit code,
no traceback, no ``internal error`` (a caught crash), within the time bound. Readers: launch flag
values, ``--config`` YAML, config.json, ``--hf-overrides``, ``--compilation-config``, a vLLM log,
/proc/meminfo, cgroup memory.max, a NUMA cpulist, host's nvidia-smi CSV, diagnose's nvidia-smi
CSV and table, the topology's affinity, and oomguard's own numeric options.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.property import fuzzlib

CI_TIME_LIMIT_S = 10.0


def _copy_root(d: Path) -> Path:
    root = d / "root"
    shutil.copytree(fuzzlib.HOST_ROOT, root)
    return root


def _flag(d, n):
    return ["plan", str(fuzzlib.write(d, "start_api.sh", f"vllm serve {fuzzlib.model_dir(d)} --max-num-seqs {n!r}\n"
                                      .replace("'", '"'))), "--gpu", "H100"]


def _tp(d, n):
    script = f'vllm serve {fuzzlib.model_dir(d)} --tensor-parallel-size "{n}" --pipeline-parallel-size "{n}"\n'
    return ["plan", str(fuzzlib.write(d, "start_api.sh", script)), "--gpu", "H100"]


def _yaml(d, n):
    return ["check", str(fuzzlib.write(d, "config.yaml", f"model: Qwen/Qwen3-8B\nmax-model-len: {n}\n"
                                       f"gpu-memory-utilization: {n}\n")), "--gpu", "H100"]


def _config_json(d, n):
    text = json.dumps(fuzzlib.MODEL_CONFIG)[:-1] + f', "rope_scaling": {{"rope_type": "yarn", "factor": {n or 0}, ' \
                                                  f'"original_max_position_embeddings": {n or 0}}}}}'
    return ["plan", "--model", str(fuzzlib.model_dir(d, text)), "--gpu", "A100-80GB"]


def _hf_overrides(d, n):
    return ["plan", "--model", str(fuzzlib.model_dir(d)), "--gpu", "H100", "--hf-overrides",
            f'{{"max_position_embeddings": {n or 0}, "rope_scaling": {{"rope_type": "yarn", "factor": {n or 0}}}}}']


def _compilation(d, n):
    return ["plan", "--model", str(fuzzlib.model_dir(d)), "--gpu", "H100", "--compilation-config",
            f'{{"max_cudagraph_capture_size": {n or 0}, "cudagraph_capture_sizes": [{n or 0}]}}']


def _log(d, n):
    text = (f"INFO 05-01 10:00:01 [kv_cache_utils.py:1] GPU KV cache size: {n} tokens\n"
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {n} GiB. GPU 0 has a total capacity "
            f"of {n} GiB of which {n} MiB is free.\n"
            f"INFO 05-01 10:00:02 [api_server.py:1] non-default args: {{'tensor_parallel_size': {n}, "
            f"'gpu_memory_utilization': {n}}}\n")
    return ["diagnose", str(fuzzlib.write(d, "vllm.log", text)), "--format", "json"]


def _meminfo(d, n):
    root = _copy_root(d)
    (root / "proc" / "meminfo").write_text(f"MemTotal: {n} kB\nMemAvailable: {n} kB\nSwapTotal: {n} kB\n")
    return ["host", "--root", str(root), "--format", "json"]


def _cgroup(d, n):
    root = _copy_root(d)
    (root / "sys/fs/cgroup/system.slice/vllm.service/memory.max").write_text(f"{n}\n")
    return ["host", "--root", str(root)]


def _cpulist(d, n):
    root = _copy_root(d)
    (root / "sys/devices/system/node/node0/cpulist").write_text(f"0-{n}\n")
    return ["host", "--root", str(root)]


def _host_smi(d, n):
    text = (f"index, uuid, name, memory.total [MiB], memory.used [MiB]\n{n}, GPU-a, H100, {n} MiB, {n} MiB\n"
            f"gpu_uuid, pid, process_name, used_gpu_memory [MiB]\nGPU-a, {n}, python3, {n} MiB\n")
    return ["host", "--root", str(fuzzlib.HOST_ROOT), "--nvidia-smi", str(fuzzlib.write(d, "gpus.csv", text))]


def _diagnose_smi(d, n):
    text = f"index, name, memory.total [MiB], memory.used [MiB]\n{n}, NVIDIA H100, {n} MiB, {n} MiB\n"
    return ["diagnose", str(fuzzlib.write(d, "nvidia-smi.csv", text))]


def _smi_table(d, n):
    text = (f"| NVIDIA-SMI 550.54  Driver Version: 550.54  CUDA Version: 12.4 |\n"
            f"|   {n}  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |   0 |\n"
            f"| N/A   34C    P0   113W /  700W |   {n}MiB /  {n}MiB |   {n}%   Default |\n"
            f"| Processes: |\n|    {n}   N/A  N/A     {n}      C   python3      {n}MiB |\n")
    return ["diagnose", str(fuzzlib.write(d, "nvidia-smi.txt", text))]


def _topo(d, n):
    text = (f"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV{n}\t0-{n}\t{n}\n"
            f"GPU1\tNV{n}\t X \t{n}\t0\n")
    return ["host", "--root", str(fuzzlib.HOST_ROOT), "--topo", str(fuzzlib.write(d, "topo.txt", text))]


def _options(d, n):
    return ["fit", "--model", str(fuzzlib.model_dir(d)), "--gpu", "H100", f"--context={n}", f"--concurrency={n}"]


READERS = {
    "launch-flag": _flag, "parallel-sizes": _tp, "config-yaml": _yaml, "config-json": _config_json,
    "hf-overrides": _hf_overrides, "compilation-config": _compilation, "vllm-log": _log, "meminfo": _meminfo,
    "cgroup": _cgroup, "cpulist": _cpulist, "host-nvidia-smi": _host_smi, "diagnose-nvidia-smi": _diagnose_smi,
    "nvidia-smi-table": _smi_table, "topology": _topo, "cli-options": _options,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_reader_takes_or_refuses_every_hostile_numeral(reader):
    problems = []
    for numeral in fuzzlib.MATRIX_NUMERALS:
        d = Path(tempfile.mkdtemp(prefix=f"oomguard-numerals-{reader}-"))
        try:
            argv = READERS[reader](d, numeral)
            o = fuzzlib.judge(fuzzlib.run_inprocess(argv, env=fuzzlib.OFFLINE_ENV, time_limit_s=CI_TIME_LIMIT_S))
            if o.problems:
                problems.append(f"{numeral[:24]!r}: {o.problems} (stderr: {o.err.strip()[-300:]})")
        finally:
            shutil.rmtree(d, ignore_errors=True)
    assert not problems, f"{reader}:\n" + "\n".join(problems)
