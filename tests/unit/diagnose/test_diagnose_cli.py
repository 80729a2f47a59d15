"""The diagnose and bundle commands: exit codes, formats, the JSON contract, the size bound, --ask."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

import pytest

from oomguard.cli.main import main
from oomguard.diagnose.ask import AskError, ask, normalise_base_url
from oomguard.diagnose.classes import FailureClass

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
CLASS_NAMES = {c.value for c in FailureClass}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_codes(capsys, tmp_path):
    assert run(capsys, "diagnose", str(LOGS / "v1-clean-start.log"))[0] == 0
    assert run(capsys, "diagnose", str(LOGS / "v1-cudagraph-oom.log"))[0] == 1
    code, _, err = run(capsys, "diagnose", str(tmp_path / "missing.log"))
    assert code == 2 and "no such file" in err and "Traceback" not in err
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    code, out, err = run(capsys, "diagnose", str(empty))
    assert code == 2 and "empty" in out


def test_json_contract(capsys):
    code, out, _ = run(capsys, "diagnose", "--format", "json", str(LOGS / "v1-kv-too-small.log"),
                       str(LOGS / "host-oom-dmesg.txt"))
    assert code == 1
    data = json.loads(out)
    assert set(data) >= {"verdicts", "facts", "inputs"}
    for v in data["verdicts"]:
        assert {"class", "confidence", "summary", "evidence", "fix"} <= set(v)
        assert v["class"] in CLASS_NAMES
        assert 0 <= v["confidence"] <= 1
        assert isinstance(v["summary"], str) and v["summary"]
        for e in v["evidence"]:
            assert set(e) == {"file", "line", "text"}
        for f in v["fix"]:
            assert {"flag", "value", "why"} <= set(f)
    assert {v["class"] for v in data["verdicts"]} >= {"kv-too-small", "host-oom"}
    facts = data["facts"]
    for key in ("version", "args", "memory", "phase_reached", "kernel_oom_kills", "gpus"):
        assert key in facts
    assert [i["kind"] for i in data["inputs"]] == ["vllm-log", "kernel-log"]


def test_clean_json_has_empty_verdicts(capsys):
    code, out, _ = run(capsys, "diagnose", "--format", "json", str(LOGS / "v0-clean-start.log"))
    assert code == 0 and json.loads(out)["verdicts"] == []


def test_text_and_markdown(capsys):
    code, out, _ = run(capsys, "diagnose", str(LOGS / "v1-sampler-warmup-oom.log"))
    assert code == 1 and "profile-oom" in out and "--max-num-seqs" in out
    code, out, _ = run(capsys, "diagnose", "--format", "markdown", str(LOGS / "v1-sampler-warmup-oom.log"))
    assert out.startswith("# oomguard diagnose") and "`--max-num-seqs 256`" in out


def test_launch_and_context_options(capsys, tmp_path):
    launch = tmp_path / "start_api.sh"
    launch.write_text("vllm serve Qwen/Qwen2.5-7B --max-model-len 131072 --gpu-memory-utilization 0.8\n")
    code, out, _ = run(capsys, "diagnose", "--format", "json", "--launch", str(launch), "--gpu", "A100 80GB",
                       "--vllm-version", "0.11.0", str(LOGS / "bad-argument-swap-space.log"))
    data = json.loads(out)
    assert data["facts"]["args"]["max_model_len"] == 131072
    assert data["facts"]["launch"]["entrypoint"] == "vllm serve"


def test_tail_after_double_dash_is_the_launch(capsys):
    code, out, _ = run(capsys, "diagnose", "--format", "json", str(LOGS / "docker-json-kv-too-small.log"), "--",
                       "vllm", "serve", "m", "--kv-cache-dtype", "fp8")
    fixes = [f["flag"] for f in json.loads(out)["verdicts"][0]["fix"]]
    assert "--kv-cache-dtype" not in fixes  # already fp8 in the launch (the log does not say)


def test_bundle_written_redacted_and_bounded(capsys, tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text((LOGS / "v1-clean-start.log").read_text() + "HF_TOKEN=hf_abcdefghijklmnopqrstuvwx1234\n"
                   + (LOGS / "v1-runtime-oom.log").read_text()
                   + "Authorization: Bearer sk-live-abcdefghijklmnopqrstu\n")
    out_md = tmp_path / "report.md"
    code, out, _ = run(capsys, "bundle", str(log), "-o", str(out_md), "--max-bytes", "6000")
    assert code == 1 and "runtime-oom" in out
    text = out_md.read_text()
    assert len(text.encode()) <= 6000
    assert "runtime-oom" in text and "## Key facts" in text
    for secret in ("hf_abcdefghij", "sk-live-abcdefghij", "sk-proj-4f9a8b7c6d5e"):
        assert secret not in text
    # a roomy limit includes the excerpt around the OOM line
    code, _, _ = run(capsys, "bundle", str(log), "-o", str(out_md), "--max-bytes", "100000")
    assert "torch.OutOfMemoryError" in out_md.read_text() and "## Log excerpts" in out_md.read_text()


class _FakeLLM(http.server.BaseHTTPRequestHandler):
    seen: list[dict] = []

    def log_message(self, *args):  # keep test output quiet
        pass

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self._reply(200, {"data": [{"id": "local-model"}]})
        else:
            self._reply(404, {})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeLLM.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if self.headers.get("Authorization") == "Bearer wrong":
            self._reply(401, {"error": "bad key"})
            return
        self._reply(200, {"choices": [{"message": {"role": "assistant", "content": "I agree: lower --max-num-seqs."}}]})


@pytest.fixture()
def fake_llm():
    _FakeLLM.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_ask_with_or_without_v1(fake_llm, suffix):
    answer = ask("report", base_url=fake_llm + suffix, api_key="k-123", model="m")
    assert answer.text == "I agree: lower --max-num-seqs."
    assert _FakeLLM.seen[-1]["path"] == "/v1/chat/completions"
    assert _FakeLLM.seen[-1]["auth"] == "Bearer k-123"
    assert _FakeLLM.seen[-1]["body"]["model"] == "m"


def test_ask_picks_the_listed_model_and_reports_errors_without_the_key(fake_llm):
    assert ask("r", base_url=fake_llm, api_key="").model == "local-model"
    with pytest.raises(AskError) as err:
        ask("r", base_url=fake_llm, api_key="wrong", model="m")
    assert "401" in str(err.value) and "wrong" not in str(err.value)
    with pytest.raises(AskError, match="cannot reach"):
        ask("r", base_url="http://127.0.0.1:9", model="m", timeout_s=2)


def test_bundle_ask_prints_second_opinion_apart(capsys, tmp_path, fake_llm, monkeypatch):
    monkeypatch.setenv("OOMGUARD_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("OOMGUARD_LLM_API_KEY", "secret-key-xyz")
    monkeypatch.setenv("OOMGUARD_LLM_MODEL", "m")
    code, out, _ = run(capsys, "bundle", str(LOGS / "v1-sampler-warmup-oom.log"), "-o", str(tmp_path / "r.md"), "--ask")
    assert code == 1
    verdict_at, opinion_at = out.index("oomguard verdict: profile-oom"), out.index("second opinion from m")
    assert verdict_at < opinion_at and "I agree" in out[opinion_at:]
    assert "secret-key-xyz" not in out
    sent = _FakeLLM.seen[-1]["body"]["messages"][-1]["content"]
    assert "profile-oom" in sent


def test_bundle_ask_without_endpoint_fails_cleanly(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("OOMGUARD_LLM_BASE_URL", raising=False)
    code, _, err = run(capsys, "bundle", str(LOGS / "v1-clean-start.log"), "-o", str(tmp_path / "r.md"), "--ask")
    assert code == 3 and "OOMGUARD_LLM_BASE_URL" in err
    assert (tmp_path / "r.md").exists()


def test_normalise_base_url():
    assert normalise_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalise_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert normalise_base_url("https://api.example.com/openai/v1") == "https://api.example.com/openai/v1"
