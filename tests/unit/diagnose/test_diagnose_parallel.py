"""The scan with worker processes (``diagnose/ahead.py``) reports exactly what the one-process scan reports.

Every output is compared whole (verdicts, evidence lines and their numbers, facts, notes: start-up counts, the
crash-loop stretches, line counts) on every log fixture and on crash loops with failures planted where the
workers' pieces meet: a failure line across a boundary, a start-up banner across one, a traceback whose frames
and exception fall in different pieces, a new exception name cut in two. Each parallel run must have taken the
workers' answers (``hits``), so a path that silently fell back to the scanner's own searches fails here.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from oomguard.diagnose import ahead, prefilter, scanner
from oomguard.diagnose.diagnosis import diagnose
from oomguard.inputs import logs

pytestmark = pytest.mark.skipif(
    prefilter.engine().name != "hyperscan" or not hasattr(os, "fork") or not hasattr(os, "sched_getaffinity"),
    reason="the worker processes run the hyperscan engine's searches, on Linux")

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "logs"
R = logs.READ_BYTES


@pytest.fixture
def run(monkeypatch):
    """``run(path, workers)``: the report of ``diagnose`` (0 workers: the one-process scan), and the workers' hits
    (None when the input was not a log scanned from a regular file: an nvidia-smi capture, a gzip)."""
    made: list[ahead.Ahead] = []
    pids: list[int] = []

    class Counted(ahead.Ahead):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
            pids.extend(self.pids)

    monkeypatch.setattr(ahead, "Ahead", Counted)
    monkeypatch.setattr(scanner, "PARALLEL_FLOOR_BYTES", 0)

    def go(path: Path, workers: int) -> tuple[dict, int | None]:
        monkeypatch.setenv(ahead.JOBS_ENV, str(max(1, workers)))
        made.clear()
        # Room for narrowed databases (earlier tests in this process may have filled the engine's _MAX_PARTIAL_DBS;
        # then a stretch surveys with the full one, the same report, but nothing to tell the workers).
        prefilter.engine()._partial.clear()
        report = diagnose([str(path)]).to_dict()
        assert len(made) <= (1 if workers > 1 else 0)
        go.narrowed = made[0].narrowed if made else 0
        go.named = made[0].named if made else 0
        for pid in pids:  # every worker was waited for: none is left running or a zombie
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
        pids.clear()
        return report, made[0].hits if made else None

    go.made = Counted

    return go


def _unit(rng: random.Random) -> str:
    """One start-up that dies in the profile run (a v0.9.2 head and the V1 profile OOM fixture), its own pids."""
    head = (FIXTURES / "healthy" / "v0.9.2-v1-profile.log").read_text().splitlines(keepends=True)[:12]
    tail = (FIXTURES / "v1-profile-oom.log").read_text().splitlines(keepends=True)[2:]
    pid = str(rng.randint(100, 99999))
    return "".join(head + tail).replace("pid=141", f"pid={pid}").replace("pid=8)", f"pid={rng.randint(2, 99)})")


def _crash_loop(path: Path, pieces: int, plants: dict[int, tuple[str, int]]) -> Path:
    """Start-ups up to ``pieces`` pieces; at piece boundary k, ``plants[k] = (text, lead)`` is written so that its
    first ``lead`` bytes end exactly at the boundary (filler lines without keywords before it)."""
    rng = random.Random(pieces)
    out = bytearray()
    for k in sorted(plants) + [None]:
        target = (pieces * R if k is None else k * R - plants[k][1])
        while len(out) < target - 16 * 1024:
            out += _unit(rng).encode()
        if k is None:
            break
        while len(out) < target:
            gap = target - len(out)
            n = min(gap, 120) if gap - 120 >= 2 or gap <= 120 else gap - 60
            out += b"." * (n - 1) + b"\n"
        assert len(out) == target
        out += plants[k][0].encode()
    path.write_bytes(bytes(out))
    return path


def _assert_same(run, path: Path, workers: int = 3) -> None:
    one, _ = run(path, 0)
    many, hits = run(path, workers)
    assert hits
    assert many == one


@pytest.mark.parametrize("fixture", sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*") if p.is_file()))
def test_every_fixture_the_same_with_workers(run, fixture, tmp_path):
    path = tmp_path / "input.log"
    data = (FIXTURES / fixture).read_bytes()
    path.write_bytes(data)
    one, _ = run(path, 0)
    many, hits = run(path, 2)
    assert many == one
    if fixture.endswith(".log") and data.strip():  # the others are launches, nvidia-smi captures, gzip
        assert hits, "a log fixture scanned without the workers' answers"


def test_all_fixtures_in_one_file_of_many_pieces_the_same(run, tmp_path):
    parts = [p.read_bytes() for p in sorted(FIXTURES.rglob("*")) if p.is_file() and not p.name.endswith(".gz")]
    blob = b"\n".join(parts)
    data = blob * (2 * R // len(blob) + 1)  # three pieces or more
    path = tmp_path / "all.log"
    path.write_bytes(data)
    _assert_same(run, path)


OOM_LINE = ("(EngineCore_0 pid=77) ERROR 09-02 11:00:00 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.\n")
TRACEBACK = ("(EngineCore_0 pid=77) ERROR 09-02 11:00:01 [core.py:700] Traceback (most recent call last):\n"
             "(EngineCore_0 pid=77) ERROR 09-02 11:00:01 [core.py:700]   File \"/opt/vllm/core.py\", line 9, in run\n"
             "(EngineCore_0 pid=77) ERROR 09-02 11:00:01 [core.py:700]     self.step()\n")
NEW_ERROR = ("(EngineCore_0 pid=77) ERROR 09-02 11:00:01 [core.py:700] ValueError: The decoder prompt (length 99999) "
             "is longer than the maximum model length of 40960.\n")
NEW_NAME = "(APIServer pid=8) ERROR 09-02 11:00:02 [serving.py:1] BrandNewConnectorError: the KV connector went away\n"


def test_failures_planted_at_piece_boundaries_the_same(run, tmp_path):
    rng = random.Random(1)
    unit = _unit(rng)
    banner = unit.index("vLLM API server version")
    plants = {
        3: (OOM_LINE, 40),  # a failure line cut by the boundary
        5: (unit, banner + 10),  # a start-up banner across it
        7: (TRACEBACK + NEW_ERROR, len(TRACEBACK) - 20),  # the frames in one piece, the exception in the next
        9: (NEW_NAME, NEW_NAME.index("ConnectorError") + 3),  # a new exception name cut in two
        11: (OOM_LINE, 0),  # a line that begins exactly on the boundary
    }
    path = _crash_loop(tmp_path / "loop.log", 14, plants)
    data = path.read_bytes()
    assert data[3 * R - 40:3 * R + 10] == OOM_LINE.encode()[:50]
    _assert_same(run, path)
    _assert_same(run, path, workers=2)
    report, _ = run(path, 3)
    text = repr(report)
    assert "BrandNewConnectorError" in text and "decoder prompt" in text  # the planted news are read, not counted


def test_a_crash_loop_in_a_file_bigger_than_the_buffer_the_same(run, tmp_path):
    # More than the reader's buffer (logs.CHUNK_BYTES): blocks after it is full, and a failure at the very end.
    path = _crash_loop(tmp_path / "loop.log", 3 * logs.CHUNK_BYTES // R, {3 * logs.CHUNK_BYTES // R - 2: (OOM_LINE, 7)})
    _assert_same(run, path, workers=2)
    assert run.narrowed > 0  # the workers were told the stretch's routine keywords, and left them out
    assert run.named > 0  # and the names the scanner knows, and watched for the others with its own expression


def test_workers_answer_as_the_scanner_would(tmp_path):
    """The two equivalences the workers' answers rest on, checked on dense text through a worker's own code: a
    survey leaving keywords out finds what the full one finds less those (the same first match of each); and the
    watch for every exception name, filtered by a set of known names, is the watch written for that set."""
    # An engine of its own: the shared one may hold _MAX_PARTIAL_DBS narrowed databases from earlier tests already,
    # and then gives the full database for a new set (survey_db says so: it leaves nothing out).
    eng = prefilter._build("hyperscan")
    rng = random.Random(4)
    text = b"".join(_unit(rng).encode() for _ in range(20)) + (NEW_NAME + NEW_ERROR + OOM_LINE).encode() * 3
    text += b"x KeyError: a\nFooException: b\n_Exit: c\nErrorError: d\n\xc3\xa9Interrupt: e\nError: bare\nOSError: f"
    assert len(text) < R
    path = tmp_path / "dense.log"
    path.write_bytes(text)
    w = ahead.Ahead.__new__(ahead.Ahead)
    w.engine, w.size, w.step = eng, len(text), R
    w.names_db = ahead._names_db(eng)
    w._new, w._new_key = {}, None
    full = eng.survey(text, 0, len(text))
    present = sorted(full.ids)
    assert len(present) > 20
    with open(path, "rb") as fh:
        w.fd = fh.fileno()
        for trial in range(6):
            leave_out = frozenset(rng.sample(present, len(present) // (trial + 2))) if trial else frozenset()
            db, left_out = eng.survey_db(leave_out)
            assert left_out == leave_out
            piece = w._piece(0, db, trial)
            assert (piece[0], piece[1]) == (0, len(text))
            assert set(piece[2]) == full.ids - leave_out
            assert piece[3] == {i: v for i, v in full.at.items() if i not in leave_out}
            assert piece[7] == text.count(b"\n")
    seen = piece[8]
    assert b"BrandNewConnectorError" in seen and b"OSError" in seen
    known = sorted(prefilter.known_names(text))
    for trial in range(7):
        names = frozenset(rng.sample(known, len(known) * trial // 6)) | {b"", b"Error"}
        want = set(eng.new_names(text, 0, len(text), names))
        got = {p for name, where in seen.items() if w._is_new(name, names) for p in where}
        assert got == want
        with open(path, "rb") as fh:
            w.fd = fh.fileno()
            told = w._piece(0, eng.survey_db()[0], 0, eng.names_db(names), 3)
        assert told[8:] == (tuple(eng.new_names(text, 0, len(text), names)), 0, 3)


def test_a_worker_that_dies_is_done_without(run, tmp_path, monkeypatch):
    # Worker 0 breaks off at once (a worker killed, out of memory): the scanner searches its pieces itself.
    original = run.made._serve

    def serve(self, j, workers, w, control):
        if j:
            return original(self, j, workers, w, control)
        os.write(w, b"\0\0")  # half a length: the scanner reads a worker that broke off mid-answer
        os._exit(0)

    monkeypatch.setattr(run.made, "_serve", serve)
    path = _crash_loop(tmp_path / "loop.log", 12, {5: (NEW_NAME, 9)})
    _assert_same(run, path, workers=2)


def test_how_many_workers(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus[0])))
    cpus = [2]
    for env, want in (("", 0), ("1", 0), ("2", 2), ("5", 5), ("99", ahead.MAX_WORKERS), ("0", 0), ("x", 0)):
        monkeypatch.setenv(ahead.JOBS_ENV, env)
        assert ahead.workers() == want, env
    monkeypatch.delenv(ahead.JOBS_ENV)
    for cpus[0], want in ((1, 0), (ahead.MIN_CPUS - 1, 0), (ahead.MIN_CPUS, ahead.MIN_CPUS), (64, ahead.MAX_WORKERS)):
        assert ahead.workers() == want, cpus[0]


def test_small_logs_never_start_a_worker(tmp_path, monkeypatch):
    monkeypatch.setenv(ahead.JOBS_ENV, "4")
    started = []
    monkeypatch.setattr(ahead.Ahead, "__init__", lambda self, *a: started.append(a) or None)
    path = _crash_loop(tmp_path / "loop.log", 8, {})
    assert path.stat().st_size < scanner.PARALLEL_FLOOR_BYTES
    diagnose([str(path)])
    assert not started
