"""The fast path (keyword scan, stretches counted) concludes what parsing every line concludes.

The reference is ``readers.every_line()``: no prefilter, no grouping, every line through the parsers.
Every labelled record (calibration and batch failures, healthy start-ups) and every log fixture must
give identical verdicts and facts both ways, with each prefilter engine: a pattern the hyperscan scan lacks
(parsers/scanset.py) or a keyword missing from ``prefilter.KEYWORDS`` (the re2/re engines) shows up here.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from oomguard.diagnose import prefilter, readers
from oomguard.diagnose.classes import FailureClass
from oomguard.diagnose.diagnosis import diagnose
from oomguard.inputs import logs

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"
FIXTURES = ROOT / "tests" / "fixtures" / "logs"


def _corpus() -> list[tuple[str, bytes]]:
    out = []
    sources = sorted(DATA.glob("calibration/failures*.jsonl")) + sorted(DATA.glob("diagnose/failures/*.jsonl")) + \
        sorted(DATA.glob("diagnose/healthy/*.jsonl"))
    for path in sources:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                out.append((f"{path.name}:{rec['id']}", (rec.get("log_excerpt") or "").encode()))
    for line in (DATA / "calibration" / "startup.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            if rec.get("raw_excerpt"):
                out.append((f"startup.jsonl:{rec['id']}", rec["raw_excerpt"].encode()))
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file():
            out.append((str(path.relative_to(ROOT)), path.read_bytes()))
    return out


CORPUS = _corpus()


@pytest.fixture
def use_engine(monkeypatch):
    def use(name: str) -> None:
        monkeypatch.setenv(prefilter.ENGINE_ENV, name)
        prefilter.engine.cache_clear()

    yield use
    prefilter.engine.cache_clear()


def _conclusions(path: str) -> dict:
    out = diagnose([path]).to_dict()
    out.pop("inputs")  # bytes, lines and notes describe the reading, not what it concluded
    return out


def _differences(tmp_path: Path, items: list[tuple[str, bytes]]) -> list[str]:
    log = tmp_path / "input.log"
    bad = []
    for name, data in items:
        log.write_bytes(data)
        fast = _conclusions(str(log))
        with readers.every_line():
            ref = _conclusions(str(log))
        if fast != ref:
            keys = sorted(k for k in set(fast["facts"]) | set(ref["facts"]) if fast["facts"].get(k) != ref["facts"].get(k))
            bad.append(f"{name}: verdicts {[v['class'] for v in fast['verdicts']]} vs "
                       f"{[v['class'] for v in ref['verdicts']]}, facts differ in {keys}")
    return bad


def test_corpus_has_every_source():
    names = {n.split(":")[0] for n, _ in CORPUS}
    assert "failures.jsonl" in names and "failures_public.jsonl" in names and "startup.jsonl" in names
    assert any(n.startswith("tests/fixtures/logs/healthy/") for n, _ in CORPUS)
    assert len(CORPUS) > 300


def test_fast_path_concludes_what_every_line_concludes(tmp_path, use_engine):
    use_engine("hyperscan")
    assert prefilter.engine().name == "hyperscan"
    assert _differences(tmp_path, CORPUS) == []


@pytest.mark.parametrize("name", ["re2", "re"])
def test_fallback_engines_conclude_the_same(tmp_path, use_engine, name):
    """The pure-regex engines (no hyperscan wheel): same answers on a sample of the corpus (the whole of it
    with hyperscan above; every record here would double the test's time)."""
    use_engine(name)
    assert prefilter.engine().name == name
    sample = random.Random(20).sample(CORPUS, 120) + [c for c in CORPUS if c[0].startswith("tests/fixtures")]
    assert _differences(tmp_path, sample) == []


def test_fallback_engine_is_named_in_the_notes(tmp_path, use_engine):
    log = tmp_path / "v.log"
    log.write_bytes((FIXTURES / "v1-kv-too-small.log").read_bytes())
    use_engine("re")
    d = diagnose([str(log)])
    assert d.verdicts[0].cls == FailureClass.KV_TOO_SMALL
    assert any("keyword scan with re" in n for n in d.inputs[0].notes)
    use_engine("hyperscan")
    assert not any("keyword scan" in n for n in diagnose([str(log)]).inputs[0].notes)


def test_engines_find_the_same_lines():
    """The keyword engines (re2, re) find the same lines; the hyperscan engine (the parsers' patterns) finds
    the lines that matter and nothing else; every engine's survey names the same keywords."""
    rng = random.Random(4)
    kinds = [
        b"(EngineCore pid=1) INFO 01-01 00:00:00 [core.py:1] Initializing a V1 LLM engine (v0.9.0) with config: x\n",
        b"INFO:     10.0.0.1:5 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n",
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
        b"the whole node RAN OUT of host memory\n", b"only 3 GPU\n", b"plain words here\n",
        "显存不足\n".encode(), b"\n"]
    text = b"".join(rng.choice(kinds) for _ in range(3000))
    results = {}
    for name in prefilter.ENGINES:
        eng = prefilter._build(name)
        survey = eng.survey(text, 0, len(text))
        found = eng.lines(text, 100, len(text) - 50)
        results[name] = (found, survey.ids, survey.run_starts)
        known = frozenset(list(survey.ids)[:3])
        assert eng.survey(text, 0, len(text), known).ids | known == survey.ids | known
        # A survey reports keywords (the hyperscan engine's lines report its patterns): the same ones everywhere.
        results[name] += ({eng.labels[i] for i in survey.ids},)
        assert survey.run_starts == [text.count(m) for m in prefilter.COUNT_MARKERS] and not survey.uncounted
        # With API server lines, they count the start-ups; hyperscan then only notes that engine lines are there.
        served = text + b"(APIServer pid=1) INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.9.0\n" * 3
        counted = eng.survey(served, 0, len(served))
        assert prefilter.start_ups(counted.run_starts) == counted.run_starts[1] == 3
        assert counted.run_starts[0] in ((0,) if name == "hyperscan" else (text.count(prefilter.COUNT_MARKERS[0]),))
        assert counted.uncounted == (name == "hyperscan")
        chosen = {text[a:b] + b"\n" for a, b, _, _ in eng.lines(text, 0, len(text))}
        assert {kinds[0], kinds[2], kinds[3], kinds[6]} <= chosen and kinds[5] not in chosen
        if name == "hyperscan":
            assert chosen == {kinds[0], kinds[2], kinds[3], kinds[6]}
    assert results["re2"] == results["re"]
    assert results["hyperscan"][3] == results["re2"][3]
    assert results["re2"][1] == set().union(*(ids for *_, ids in results["re2"][0]))


def _crash_loop(restarts: int, seed: int = 1) -> bytes:
    """``restarts`` start-ups of the profile-OOM fixture, each with its own pids."""
    rng = random.Random(seed)
    unit = (FIXTURES / "v1-profile-oom.log").read_text()
    out = []
    for _ in range(restarts):
        out.append(unit.replace("pid=177", f"pid={rng.randint(1000, 9999)}").replace("pid=141", f"pid={rng.randint(1000, 9999)}"))
    return "".join(out).encode()


def test_crash_loop_is_grouped_and_concludes_the_same(tmp_path):
    data = _crash_loop(3000)  # ~12 MB, 72,000 lines
    log = tmp_path / "loop.log"
    log.write_bytes(data)
    d = diagnose([str(log)])
    with readers.every_line():
        ref = diagnose([str(log)])
    assert [v.cls for v in d.verdicts] == [v.cls for v in ref.verdicts]
    assert d.verdicts[0].cls == FailureClass.PROFILE_OOM
    assert [e.line for e in d.verdicts[0].evidence] == [e.line for e in ref.verdicts[0].evidence]
    # the last start-up was read to its end: the latest OOMs kept are the file's last ones
    def last_ooms(diag):
        return sorted(ev.line for ev in diag.collector.signals if ev.signal.value == "cuda-oom")[-3:]

    assert last_ooms(d)[-1] == last_ooms(ref)[-1] > data.count(b"\n") - 5
    assert last_ooms(d)[-2] == data.count(b"\n") - 3  # the last run's own OOM, before the API server's echo
    report = d.inputs[0]
    assert report.lines == data.count(b"\n")
    assert report.matched_lines < 1500  # parsed: the first start-ups and the last; 66,000 counted
    notes = " ".join(report.notes)
    # every start-up but the parsed ones is counted in the stretch; 3000 in all
    summary = next(n for n in report.notes if "stretch(es)" in n)
    counted = int(summary.split(" start-up(s))")[0].rsplit(", ", 1)[1].replace(",", ""))
    assert 2900 < counted < 3000 and "start-up(s) (a crash loop)" in notes and "counted, not parsed" in summary
    assert _start_ups(report) == 3000


def _start_ups(report) -> int:
    said = [n for n in report.notes if " start-ups in this input" in n]
    return int(said[0].split(" ", 1)[0].replace(",", "")) if said else 1


@pytest.mark.parametrize("restarts", [2, 7, 40, 1000])
def test_a_crash_loop_of_n_start_ups_says_n_and_what_one_says(tmp_path, restarts):
    one, loop = tmp_path / "one.log", tmp_path / "loop.log"
    one.write_bytes(_crash_loop(1))
    loop.write_bytes(_crash_loop(restarts))
    single, d = diagnose([str(one)]), diagnose([str(loop)])
    assert _start_ups(single.inputs[0]) == 1 and _start_ups(d.inputs[0]) == restarts  # parsed and counted ones alike
    assert [v.cls for v in d.verdicts] == [v.cls for v in single.verdicts] == [FailureClass.PROFILE_OOM]
    assert [f.to_dict() for f in d.verdicts[0].fix] == [f.to_dict() for f in single.verdicts[0].fix]
    # the evidence is made of lines the single start-up gives as evidence (whichever runs they were taken from)
    unit = single.inputs[0].lines
    assert {(e.line - 1) % unit + 1 for e in d.verdicts[0].evidence} <= {e.line for e in single.verdicts[0].evidence}


def test_a_different_failure_inside_a_crash_loop_is_not_lost(tmp_path):
    middle = (FIXTURES / "v1-no-kv-memory.log").read_bytes()
    data = _crash_loop(1500) + middle + _crash_loop(1500, seed=2)
    log = tmp_path / "loop.log"
    log.write_bytes(data)
    classes = {v.cls for v in diagnose([str(log)]).verdicts}
    assert {FailureClass.PROFILE_OOM, FailureClass.NO_KV_MEMORY} <= classes


def test_distinct_error_lines_are_counted_and_the_final_failure_found(tmp_path):
    rng = random.Random(9)
    head = (FIXTURES / "healthy" / "v0.8.5-v1.log").read_bytes()
    lines = [f"(APIServer pid=1) ERROR 05-01 12:00:{i % 60:02d} [serving_chat.py:{rng.randint(1, 999)}] Error in "
             f"request chatcmpl-{rng.getrandbits(64):016x}: {rng.getrandbits(30)} reset by peer\n" for i in range(60000)]
    tail = (FIXTURES / "v1-runtime-oom.log").read_bytes().split(b"\n", 11)[-1]  # its failure, after serving
    data = head + "".join(lines).encode() + tail
    log = tmp_path / "errors.log"
    log.write_bytes(data)
    d = diagnose([str(log)])
    assert d.verdicts[0].cls == FailureClass.RUNTIME_OOM
    # parsed: the head, each keyword's first occurrences and their context; not the 60,000 lines
    assert d.inputs[0].matched_lines < 5000
    assert len(d.collector.errors) <= 50 and len(d.collector.timeline) <= 400
    assert any("counted, not parsed one by one" in n for n in d.inputs[0].notes)


def test_gzip_and_stdin_read_like_the_file(tmp_path):
    data = _crash_loop(800)
    log = tmp_path / "loop.log"
    log.write_bytes(data)
    gz = tmp_path / "loop.log.gz"
    gz.write_bytes(gzip.compress(data))
    want = _conclusions(str(log))
    assert json.dumps(_conclusions(str(gz))).replace(str(gz), str(log)) == json.dumps(want)
    proc = subprocess.run([sys.executable, "-m", "oomguard.cli.main", "diagnose", "--format", "json", "-"],
                          input=data, capture_output=True, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 1, proc.stderr
    got = json.loads(proc.stdout)
    assert [v["class"] for v in got["verdicts"]] == [v["class"] for v in want["verdicts"]]
    assert [e["line"] for e in got["verdicts"][0]["evidence"]] == [e["line"] for e in want["verdicts"][0]["evidence"]]


@pytest.mark.parametrize("seed", range(6))
def test_file_blocks_number_every_line_like_the_stream_reader(tmp_path, seed):
    """The direct file reader and the stream reader both yield every line once, with its number and the
    context before it as in the file (small chunks, long lines, a missing final newline)."""
    rng = random.Random(seed)
    parts = []
    for _ in range(400):
        k = rng.random()
        parts.append(b"x" * rng.randint(3000, 9000) if k < 0.05 else b"line %d %s" % (rng.randint(0, 99), b"y" * rng.randint(0, 120)))
    data = b"\n".join(parts) + (b"\n" if seed % 2 else b"")
    path = tmp_path / "f.log"
    path.write_bytes(data)
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()

    def check(blocks) -> None:
        seen: dict[int, bytes] = {}
        pieces = set()
        for b in blocks:
            if b.long_line_piece:
                assert bytes(b.data) in lines[b.first_line - 1]
                pieces.add(b.first_line)
                continue
            assert bytes(b.data[:b.begin]) == data[b.offset:b.offset + b.begin]  # the context is the file's
            if b.end == b.begin:
                continue  # before a long line, the direct reader hands back the lines above it as context only
            chunk = bytes(b.data[b.begin:b.end])
            texts = chunk.split(b"\n")
            if chunk.endswith(b"\n"):
                texts.pop()
            for n, text in enumerate(texts, b.first_line):
                whole = lines[n - 1]
                # a line cut into pieces ends in the next block: its rest is the end of the line
                assert text == whole or (n in pieces and whole.endswith(text)), n
                seen[n] = text
        assert sorted(set(seen) | pieces) == list(range(1, len(lines) + 1))

    kw = dict(chunk_bytes=4096, max_carry_bytes=2048)
    n1, n2 = logs.ReadNotes(), logs.ReadNotes()
    with open(path, "rb") as fh:
        check(logs.iter_scan_blocks(fh, n1, context_bytes=1000, direct=True, **kw))
    check(logs.iter_scan_blocks(io.BufferedReader(io.BytesIO(data)), n2, context_bytes=1000, **kw))
    assert (n1.lines, n1.bytes_read) == (n2.lines, n2.bytes_read) == (len(lines), len(data))
    # lines longer than the carry are noted when they had to be cut: the stream reader cuts at every chunk
    assert 0 < n1.long_lines <= n2.long_lines


@pytest.mark.parametrize("kind", ["crash-loop", "errors", "loop-with-long-runs"])
def test_context_window_chooses_what_the_whole_window_chooses(tmp_path, monkeypatch, kind):
    """A stretch's closing context is found from a window grown from its end (scanner._context); the lines
    parsed, the notes and the verdicts are those of the half-megabyte window it replaced."""
    from oomguard.diagnose import scanner

    rng = random.Random(4)
    if kind == "crash-loop":
        data = _crash_loop(300) + (FIXTURES / "v1-no-kv-memory.log").read_bytes() + _crash_loop(300, seed=3)
    elif kind == "errors":
        head = (FIXTURES / "healthy" / "v0.8.5-v1.log").read_bytes()
        lines = [f"(APIServer pid=1) ERROR 05-01 12:00:{i % 60:02d} [serving_chat.py:{rng.randint(1, 999)}] Error in "
                 f"request {rng.getrandbits(64):016x}: {rng.getrandbits(30)} reset by peer"
                 + (" (exit code 137)" if i % 7001 == 7000 else "") + "\n" for i in range(30000)]
        data = head + "".join(lines).encode() + (FIXTURES / "v1-runtime-oom.log").read_bytes().split(b"\n", 11)[-1]
    else:  # start-ups far apart: the last one is further back than the first window
        unit = _crash_loop(1)
        filler = b"".join(b"(APIServer pid=1) ERROR 05-01 12:00:00 [serving_chat.py:1] Error in request %d\n" % i
                          for i in range(700))
        data = (unit + filler) * 60
    log = tmp_path / "x.log"
    log.write_bytes(data)

    def run():
        d = diagnose([str(log)])
        return ([v.cls for v in d.verdicts], [[e.line for e in v.evidence] for v in d.verdicts],
                d.inputs[0].matched_lines, d.inputs[0].notes)

    grown = run()
    monkeypatch.setattr(scanner, "_CONTEXT_WINDOW", scanner.CONTEXT_BYTES)
    assert grown == run()
