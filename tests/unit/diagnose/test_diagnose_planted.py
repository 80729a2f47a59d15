"""A new kind of failure inside a long stretch of routine lines is found and parsed with its context.

Stretches (diagnose/scanner.py) are counted, not parsed line by line; what reopens one is a keyword not yet
routine, or a line naming an exception no parsed line named. Here real failure lines are planted in the middle
of a crash loop (thousands of start-ups, each dying of a CUDA OOM in the profile run) and of a flood of distinct
error lines: a different CUDA error, a host OOM kill, an NCCL error, a traceback of an exception not seen yet,
and a traceback of a missing dependency. Each must change the verdicts or the facts exactly as the full parse
(``readers.every_line()``) does: the same verdict classes, and the same signals of the kinds the plant brings
(at the same lines). The small logs are compared with the full parse; the 50 MB ones with the small ones'
answers (the full parse of 50 MB takes about a minute; the fast path, a fraction of a second).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from oomguard.diagnose import readers, scanner
from oomguard.diagnose.diagnosis import diagnose

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "logs"


def _lines(name: str, a: int, b: int) -> bytes:
    return b"".join((FIXTURES / name).read_bytes().splitlines(keepends=True)[a:b])


_NEW_EXCEPTION = (
    b"(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043] Traceback (most recent call last):\n"
    b"(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043]   File \"/usr/local/lib/python3.12/dist-packages/vllm/"
    b"v1/engine/core.py\", line 1067, in run_busy_loop\n"
    b"(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043]     self._process_engine_step()\n"
    b"(EngineCore pid=187) ERROR 05-03 02:11:27 [core.py:1043] ZeroDivisionError: division by zero\n")

PLANTS = {
    "cuda-error": _lines("illegal-memory-access.log", 4, 14),  # RuntimeError: CUDA error: an illegal memory access
    "host-oom-kill": _lines("host-oom-dmesg.txt", 0, 7),  # the kernel's OOM killer
    "nccl-error": _lines("nccl-shm.log", 6, 13),  # NCCL WARN, then RuntimeError: NCCL error
    "new-exception": _NEW_EXCEPTION,  # a traceback ending in an exception no start-up raised
    "import-traceback": _lines("missing-dependency.log", 3, 20),  # ModuleNotFoundError, then ImportError
}


def _crash_loop(size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    unit = (FIXTURES / "v1-profile-oom.log").read_text()
    out, n = [], 0
    while n < size:
        text = unit.replace("pid=177", f"pid={rng.randint(1000, 9999)}").replace("pid=141", f"pid={rng.randint(1000, 9999)}")
        out.append(text)
        n += len(text)
    return "".join(out).encode()


def _flood(size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    words = "alpha beta request worker timeout reset peer stream chunk decode prompt schema abort".split()
    out, n = [], 0
    while n < size:
        line = (f"(APIServer pid=1) ERROR 05-01 12:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} "
                f"[serving_chat.py:{rng.randint(1, 999)}] Error in request chatcmpl-{rng.getrandbits(64):016x}: "
                f"{' '.join(rng.choice(words) for _ in range(rng.randint(2, 6)))} {rng.getrandbits(30)}\n")
        out.append(line)
        n += len(line)
    return "".join(out).encode()


def _log(kind: str, plants: list[bytes], size: int) -> tuple[bytes, list[int]]:
    """``kind``'s log of about ``size`` bytes with each plant at an even distance: (the log, each plant's first line)."""
    part = size // (len(plants) + 1)
    if kind == "crash-loop":
        pieces = [_crash_loop(part, seed) for seed in range(len(plants) + 1)]
        head, tail = b"", b""
    else:
        pieces = [_flood(part, seed) for seed in range(len(plants) + 1)]
        head = (FIXTURES / "healthy" / "v0.8.5-v1.log").read_bytes()
        tail = (FIXTURES / "v1-runtime-oom.log").read_bytes().split(b"\n", 11)[-1]  # its failure, after serving
    data, starts = head + pieces[0], []
    for plant, piece in zip(plants, pieces[1:], strict=True):
        starts.append(data.count(b"\n") + 1)
        data += plant + piece
    return data + tail, starts


def _answers(path: Path, full: bool = False):
    if full:
        with readers.every_line():
            d = diagnose([str(path)])
    else:
        d = diagnose([str(path)])
    return [v.cls.value for v in d.verdicts], [(e.signal.value, e.line) for e in d.collector.signals], d


_BASE: dict[str, set[str]] = {}


def _base_kinds(tmp_path: Path, kind: str) -> set[str]:
    """The signal kinds of the log without any plant (full parse), once per kind."""
    if kind not in _BASE:
        path = tmp_path / f"{kind}-base.log"
        path.write_bytes(_log(kind, [], 1_000_000)[0])
        _BASE[kind] = {s for s, _ in _answers(path, full=True)[1]}
    return _BASE[kind]


def _planted(signals: list[tuple[str, int]], start: int, plant: bytes, base: set[str]) -> list[tuple[str, int]]:
    end = start + plant.count(b"\n")
    return sorted((s, line) for s, line in signals if s not in base and start <= line < end)


@pytest.mark.parametrize("kind", ["crash-loop", "distinct-errors"])
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_failure_planted_in_a_stretch_changes_what_the_full_parse_changes(tmp_path, monkeypatch, kind, plant):
    # Small surveys: the plant is dozens of surveys into its stretch, past the stretch's first (_FULL_SURVEYS).
    monkeypatch.setattr(scanner, "SUB_BYTES", 16 * 1024)
    data, (start,) = _log(kind, [PLANTS[plant]], 1_000_000)
    path = tmp_path / "planted.log"
    path.write_bytes(data)
    base = _base_kinds(tmp_path, kind)
    classes, signals, d = _answers(path)
    full_classes, full_signals, _ = _answers(path, full=True)
    want = _planted(full_signals, start, PLANTS[plant], base)
    assert want, "the plant brings a signal of its own in the full parse"
    assert classes == full_classes
    assert _planted(signals, start, PLANTS[plant], base) == want
    assert d.inputs[0].matched_lines < 3000  # the rest was counted or skipped, not parsed


@pytest.mark.parametrize("kind", ["crash-loop", "distinct-errors"])
def test_every_failure_planted_in_50_mb_is_found(tmp_path, kind):
    """All five plants in one 50 MB log: each one's signals at its own lines, as in the small logs' full parse
    above (the same lines relative to the plant), and every verdict class they bring."""
    small = {}
    base = _base_kinds(tmp_path, kind)
    for name, plant in PLANTS.items():
        data, (start,) = _log(kind, [plant], 1_000_000)
        path = tmp_path / f"{name}.log"
        path.write_bytes(data)
        classes, signals, _ = _answers(path, full=True)
        small[name] = ({c for c in classes}, [(s, line - start) for s, line in _planted(signals, start, plant, base)])
    data, starts = _log(kind, list(PLANTS.values()), 50_000_000)
    path = tmp_path / "big.log"
    path.write_bytes(data)
    classes, signals, d = _answers(path)
    for (name, plant), start in zip(PLANTS.items(), starts, strict=True):
        assert [(s, line - start) for s, line in _planted(signals, start, plant, base)] == small[name][1], name
    # Which of the plants' classes rank among the verdicts depends on the whole log; none is one they do not bring.
    assert classes and set(classes) <= set().union(*(c for c, _ in small.values()))
    assert d.inputs[0].matched_lines < 20_000  # 50 MB: the plants and their context, not the stretch
    assert any("counted, not parsed one by one" in n for n in d.inputs[0].notes)
