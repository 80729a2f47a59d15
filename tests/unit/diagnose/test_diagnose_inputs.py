"""Reading odd inputs: binary, empty, invalid UTF-8, huge lines, gzip, block boundaries, prefixes."""

from __future__ import annotations

import gzip
import io
import os

import pytest

from oomguard.diagnose.classes import FailureClass, InputKind
from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose.lines import parse_line
from oomguard.diagnose.readers import detect_kind
from oomguard.errors import InputError
from oomguard.inputs import logs

NO_KV = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def test_empty_file_is_noted_not_a_crash(tmp_path):
    d = diagnose([_write(tmp_path, "empty.log", b"")])
    assert d.verdicts == []
    assert d.inputs[0].kind == InputKind.EMPTY
    assert any("empty" in n for n in d.inputs[0].notes)
    assert not d.readable


def test_binary_file_is_skipped_with_a_note(tmp_path):
    data = bytes(range(256)) * 4000 + b"\x00" * 1000
    d = diagnose([_write(tmp_path, "core.bin", data)])
    assert d.inputs[0].kind == InputKind.BINARY
    assert any("binary" in n for n in d.inputs[0].notes)
    assert d.verdicts == []


def test_random_bytes_are_binary():
    assert detect_kind(os.urandom(20000)) == InputKind.BINARY


def test_invalid_utf8_lines_still_classify(tmp_path):
    data = ("INFO 01-01 00:00:00 worker.py:1] hello\n").encode() + b"caf\xe9 \xff\xfe broken\n" + \
        b"\xc3\x28 " + NO_KV.encode() + b"\n"
    d = diagnose([_write(tmp_path, "latin1.log", data)])
    assert d.verdicts[0].cls == FailureClass.NO_KV_MEMORY
    assert any("invalid UTF-8" in n for n in d.inputs[0].notes)


def test_ten_megabyte_line_is_bounded_and_noted(tmp_path):
    big = b"x" * (10 * 1024 * 1024)
    data = b"INFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.11.0\n" + big + b"\n" + NO_KV.encode() + b"\n"
    d = diagnose([_write(tmp_path, "long.log", data)])
    assert d.verdicts[0].cls == FailureClass.NO_KV_MEMORY
    assert d.verdicts[0].evidence[0].line == 3
    assert any("longer than" in n for n in d.inputs[0].notes)
    assert d.inputs[0].lines == 3


def test_keyword_inside_a_huge_line_is_found_and_truncated(tmp_path):
    data = b"y" * (3 * 1024 * 1024) + NO_KV.encode() + b"z" * (3 * 1024 * 1024) + b"\n"
    d = diagnose([_write(tmp_path, "one-line.log", data)])
    assert d.verdicts and d.verdicts[0].cls == FailureClass.NO_KV_MEMORY
    assert len(d.verdicts[0].evidence[0].text) <= logs.MAX_LINE_BYTES


def test_gzip_is_read_transparently(tmp_path):
    p = tmp_path / "vllm.log.gz"
    with gzip.open(p, "wb") as fh:
        fh.write(b"INFO 01-01 00:00:00 x.py:1] start\n" + NO_KV.encode() + b"\n")
    d = diagnose([str(p)])
    assert d.verdicts[0].cls == FailureClass.NO_KV_MEMORY
    assert any("gzip" in n for n in d.inputs[0].notes)


def test_missing_file_and_directory_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        diagnose([str(tmp_path / "nope.log")])
    with pytest.raises(InputError, match="directory"):
        diagnose([str(tmp_path)])


def test_block_boundaries_keep_line_numbers(tmp_path):
    """Lines and 'the next line' survive chunking: a message split across two lines at EOF."""
    notes = logs.ReadNotes()
    data = b"".join(b"line %d\n" % i for i in range(1, 5001)) + b"last line without newline"
    blocks = list(logs.iter_blocks(io.BufferedReader(io.BytesIO(data)), notes, chunk_bytes=4096))
    assert len(blocks) > 5
    assert blocks[0].first_line == 1
    total = sum(b.data.count(b"\n") for b in blocks)
    assert total == 5000
    assert blocks[-1].data.endswith(b"last line without newline")
    assert notes.lines == 5001
    # each block starts on the line number its first line has
    for b in blocks:
        first = b.data.split(b"\n", 1)[0]
        if first.startswith(b"line "):
            assert int(first.split()[1]) == b.first_line


def test_wrapped_message_across_lines(tmp_path):
    text = 'vLLM\nrefused to start at `--max-model-len 32768` with *"4.5 GiB KV cache is\nneeded"*'
    d = diagnose([_write(tmp_path, "wrapped.md", text.encode())])
    assert d.verdicts[0].cls == FailureClass.KV_TOO_SMALL


@pytest.mark.parametrize(
    ("raw", "message", "proc", "level", "kernel"),
    [
        ("\x1b[1;36m(EngineCore_DP0 pid=12)\x1b[0;0m \x1b[32mINFO\x1b[0m 11-14 14:24:27 [gpu_worker.py:298] Available KV cache memory: 1.0 GiB",
         "Available KV cache memory: 1.0 GiB", "EngineCore_DP0 pid=12", "INFO", False),
        ("vllm-1  | INFO 04-02 21:42:59 model_runner.py:1099] Loading model weights took 15.5083 GB",
         "Loading model weights took 15.5083 GB", "", "INFO", False),
        ("2025-07-09T11:02:31.120113221Z stderr F (APIServer pid=1) ERROR 07-09 11:02:31 [core.py:1] boom",
         "boom", "APIServer pid=1", "ERROR", False),
        ('{"log":"(EngineCore pid=7) INFO 02-11 08:41:02 [x.py:1] hi\\n","stream":"stdout","time":"t"}',
         "hi", "EngineCore pid=7", "INFO", False),
        ("Jul 14 03:12:55 gpu-node-7 kernel: Memory cgroup out of memory: Killed process 1 (python3)",
         "Memory cgroup out of memory: Killed process 1 (python3)", "", None, True),
        ("[183201.442497] Out of memory: Killed process 2381 (VLLM::EngineCor)",
         "Out of memory: Killed process 2381 (VLLM::EngineCor)", "", None, True),
        ("(RayWorkerWrapper pid=77, ip=10.0.0.2) INFO 06-28 06:11:45 worker.py:1] hello", "hello",
         "RayWorkerWrapper pid=77", "INFO", False),
        ("(VllmWorker rank=0 pid=3312) INFO 03-20 02:26:31 [gpu_model_runner.py:1126] Model loading took 9.0 GB",
         "Model loading took 9.0 GB", "VllmWorker rank=0 pid=3312", "INFO", False),
        ("[rank0]: torch.OutOfMemoryError: CUDA out of memory.", "torch.OutOfMemoryError: CUDA out of memory.",
         "rank0", None, False),
        ("22:07:58  INFO [model_runner.py:1115] Model loading took 6.5935 GiB", "Model loading took 6.5935 GiB",
         "", "INFO", False),
    ],
)
def test_prefixes_are_stripped(raw, message, proc, level, kernel):
    line = parse_line("f", 1, raw)
    assert line.message == message
    assert line.proc == proc
    assert line.level == level
    assert line.kernel == kernel


def test_kind_detection_by_content_not_name(tmp_path):
    smi = (tmp_path / "vllm.log")
    smi.write_text("timestamp, index, name, memory.used [MiB], memory.total [MiB]\n2025/01/01 00:00:00.000, 0, NVIDIA L4, 100 MiB, 23034 MiB\n")
    d = diagnose([str(smi)])
    assert d.inputs[0].kind == InputKind.NVIDIA_SMI_CSV
    launch = tmp_path / "nvidia-smi.txt"
    launch.write_text("#!/bin/bash\nexport HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz\nvllm serve Qwen/Qwen3-8B --max-model-len 8192 --swap-space 4\n")
    d = diagnose([str(launch)])
    assert d.inputs[0].kind == InputKind.LAUNCH
    assert d.context.args["max_model_len"] == 8192
    assert "hf_abcdef" not in str(d.to_dict())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("INFO 03-01 10:00:00 llm_engine.py:72] Initializing an LLM engine with config: model='m', dtype=torch.float16, "
         "max_seq_len=2048, tensor_parallel_size=1, seed=0)\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to "
         "allocate 270.00 MiB (GPU 0; 23.69 GiB total capacity; 22.81 GiB already allocated; 7.69 MiB free; 22.88 GiB "
         "reserved in total by PyTorch)", "weights-oom"),
        ("(RayWorkerWrapper pid=2311, ip=10.0.0.4) ERROR 06-28 06:11:45 worker_base.py:145] Error executing method "
         "determine_num_available_blocks. This might cause deadlock in distributed execution.\n(RayWorkerWrapper "
         "pid=2311, ip=10.0.0.4) ERROR 06-28 06:11:45 worker_base.py:145] torch.OutOfMemoryError: CUDA out of memory. "
         "Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 39.39 GiB of which 2.11 GiB is free.", "profile-oom"),
        ("Jul 14 03:12:50 node python3[4021]: INFO 07-14 03:12:50 [gpu_model_runner.py:1] Model loading took 14.2 GiB "
         "and 3.0 seconds\nJul 14 03:12:55 node python3[4021]: torch.OutOfMemoryError: HIP out of memory. Tried to "
         "allocate 8.00 GiB. GPU 0 has a total capacity of 191.98 GiB of which 1.20 GiB is free.", "profile-oom"),
        ("[Thu May  1 12:00:01 2025] Out of memory: Killed process 7731 (pt_main_thread) total-vm:61234567kB, "
         "anon-rss:52345678kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:100000kB oom_score_adj:0", "host-oom"),
        ("May 01 12:00:02 host systemd[1]: vllm.service: A process of this unit has been killed by the OOM killer.\n"
         "May 01 12:00:02 host systemd[1]: vllm.service: Failed with result 'oom-kill'.", "host-oom"),
        ("    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137", "host-oom"),
        ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 34359738368 bytes. "
         "Error code 12 (Cannot allocate memory)", "host-oom"),
        ("usage: vllm serve [model_tag] [options]\nvllm serve: error: unrecognized arguments: --kv-cache-memory-byte 8G",
         "bad-argument"),
        ("TypeError: EngineArgs.__init__() got an unexpected keyword argument 'swap_space'", "bad-argument"),
        ("ValueError: World size (8) is larger than the number of available GPUs (4) in this node.", "config-error"),
        ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
         "compute capability 7.5.", "config-error"),
        ("ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
         "Try increasing `gpu_memory_utilization`.", "no-kv-memory"),
        ("RuntimeError: CUDA error: device-side assert triggered", "illegal-memory-access"),
        ("WARNING 05-01 12:00:00 scheduler.py:1057] Sequence group 12 is preempted by PreemptionMode.RECOMPUTE mode "
         "because there is not enough KV cache space. This can affect the end-to-end performance.", None),
        ("WARNING 04-02 21:43:05 model_runner.py:1415] If out-of-memory error occurs during cudagraph capture, consider "
         "decreasing `gpu_memory_utilization` or switching to eager mode.", None),
    ],
)
def test_message_variants(tmp_path, text, expected):
    d = diagnose([_write(tmp_path, "v.log", (text + "\n").encode())])
    got = d.verdicts[0].cls.value if d.verdicts else None
    assert got == expected, [(v.cls.value, v.confidence) for v in d.verdicts]


@pytest.mark.parametrize("raw", [
    b"a,b\r\nc\n\nlast without newline",
    "GPU 0 显存 81920 MiB\n".encode() * 3,
    b"bad \xff utf-8\nok\n",
    b"nul \x00 byte\nok\n",
    b"x" * (logs.MAX_LINE_BYTES + 10) + b"\nshort\n",
    ("é" * (logs.MAX_LINE_BYTES // 2)).encode() + b"\n",
    # More than the megabyte decoded at a time: numbers go on across the pieces, one of them the slow way.
    b"ab\n" * 400_000 + b"bad \xff\n" + "é\r\n".encode() * 200_000 + b"last",
])
def test_text_lines_decoded_per_block_as_per_line(raw):
    """iter_text_lines decodes a clean block at once: the same lines, numbers and notes as decode_line."""
    import io

    fast_notes, slow_notes = logs.ReadNotes(), logs.ReadNotes()
    fast = list(logs.iter_text_lines(io.BufferedReader(io.BytesIO(raw)), fast_notes))
    parts = raw.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    slow = [(i, logs.decode_line(p, i, slow_notes)) for i, p in enumerate(parts, start=1)]
    assert fast == slow
    assert (fast_notes.invalid_utf8_lines, fast_notes.truncated_lines, fast_notes.nul_bytes) == \
        (slow_notes.invalid_utf8_lines, slow_notes.truncated_lines, slow_notes.nul_bytes)
