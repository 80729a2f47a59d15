"""The one redactor (oomguard.redact) and every command's output edge (issue 13.4).

Secrets planted in launches, env, process command lines, LLM replies and error
messages must not appear in any output; the output stays valid JSON.
"""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from oomguard.cli.main import main
from oomguard.redact import (
    MASK,
    Redactor,
    is_secret_name,
    redact_argv,
    redact_data,
    redact_text,
    safe_terminal_text,
    secret_values,
)

SECRETS = ("s3cretKEYvalue", "nestedSECRET1", "hunter2pw", "hf_abcdefghijklmnopqrstuvwxyz123", "pw-in-json-99")
ROOTS = Path(__file__).resolve().parents[1] / "fixtures" / "host" / "roots"

LAUNCH = """#!/bin/bash
export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123
vllm serve Qwen/Qwen3-8B --api-key s3cretKEYvalue --api-key s3cretKEYvalue --max-model-len 40960000 \\
  --kv-transfer-config '{"kv_connector":"X","kv_connector_extra_config":{"api_key":"nestedSECRET1","password":"pw-in-json-99","url":"http://bob:hunter2pw@x:1"}}'
"""


@pytest.mark.parametrize("name", ["--api-key", "api_key", "HF_TOKEN", "hf_token", "--hf-token", "password",
                                  "AWS_SECRET_ACCESS_KEY", "apiKey", "MY_SERVICE_KEY", "DB_PASSWD", "token", "key",
                                  # issue 20: the names `check` masks and `export` used to write inline
                                  "REDIS_PASSWD", "LMCACHE_AUTH_HEADER", "GOOGLE_APPLICATION_CREDENTIALS",
                                  "LMCACHE_KEY", "DBPASSWORD", "VLLM_DB_PASSWORD_FILE", "AWS_ACCESS_KEY_ID"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["max_tokens", "MAX_NUM_BATCHED_TOKENS", "--max-num-batched-tokens", "tokenizer",
                                  "num_key_value_heads", "--ssl-keyfile", "kv_cache_dtype", "TOKENIZERS_PARALLELISM",
                                  "author", "HF_TOKEN_PATH", "max_num_scheduled_tokens", "keyframes"])
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_structures_keep_json_valid_and_lose_secrets():
    data = {
        "text": 'a \\" quote and Bearer abcdefgh1234 and "x"',
        "flags": {"--api-key": "zz1234", "--kv-transfer-config": '{"kv_connector":"X","extra":{"password":"pw-in-json-99"}}'},
        "fix": [{"flag": "--api-key", "value": ["s3cretKEYvalue"]}],
        "argv": ["--hf-token", "tok12345", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123"],
        "n": 3, "none": None,
    }
    out = json.dumps(redact_data(data))
    back = json.loads(out)
    for secret in ("zz1234", "pw-in-json-99", "s3cretKEYvalue", "tok12345", "hf_abcdefghij", "abcdefgh1234"):
        assert secret not in out
    assert back["n"] == 3 and back["none"] is None
    assert json.loads(back["flags"]["--kv-transfer-config"])["kv_connector"] == "X"
    assert 'a \\" quote' in back["text"]  # the backslash survives: nothing ran over serialized text


def test_known_secrets_also_in_json_escaped_form():
    r = Redactor(['k"ey\\x-123'])
    assert 'k"ey\\x-123' not in r.text('said k"ey\\x-123')
    assert json.dumps('k"ey\\x-123')[1:-1] not in r.text(json.dumps({"a": 'k"ey\\x-123'}))


def test_argv_and_secret_values():
    argv = ["env", "HF_TOKEN=hf_abcdefghijkl", "vllm", "serve", "--api-key", "kk12", "--kv-transfer-config", '{"secret":"s1234"}']
    out = " ".join(redact_argv(argv))
    assert "hf_abcdefghijkl" not in out and "kk12" not in out and "s1234" not in out and "--port" not in out
    assert set(secret_values({"api_key": "a1234", "x": '{"token": "t5678"}'}, {"HF_TOKEN": "h9999", "PATH": "/bin"})) \
        == {"a1234", "t5678", "h9999"}


def test_prose_after_a_flag_is_not_a_value():
    assert redact_text("--api-key is given 2 times") == "--api-key is given 2 times"
    assert redact_text("--api-key=is") == f"--api-key={MASK}"


def test_terminal_text():
    assert safe_terminal_text("a\x1b[31mred\x1b[0m\x1b]0;title\x07\rb\u202ec\td\n") == "aredbc\td\n"


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_check_outputs_no_secret_in_any_format(capsys, tmp_path, fmt):
    script = tmp_path / "start_api.sh"
    script.write_text(LAUNCH)
    rc = main(["check", str(script), "--gpu", "A100-80GB", "--format", fmt])
    out, err = capsys.readouterr()
    assert rc == 1  # errors found (max-model-len), not a crash
    for secret in SECRETS:
        assert secret not in out + err, (fmt, secret)
    if fmt in ("json", "sarif"):
        json.loads(out)
    assert "duplicate-flag" in out or "OG610" in out  # the finding is still reported


def test_check_fix_keeps_the_secret_in_the_file_it_writes(capsys, tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text(LAUNCH)
    main(["check", str(script), "--gpu", "A100-80GB", "--fix"])
    out, err = capsys.readouterr()
    assert "s3cretKEYvalue" not in out + err
    assert "s3cretKEYvalue" in (tmp_path / "start_api.fixed.sh").read_text()  # the user's launch still works


def test_host_json_masks_env_assignments_in_command_lines(capsys, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(ROOTS / "bad_kernel_settings", root, symlinks=True)
    proc = root / "proc" / "5151"
    proc.mkdir(parents=True)
    argv = ["env", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123", "vllm", "serve", "m", "--kv-transfer-config",
            '{"password":"pw-in-json-99"}']
    (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (proc / "oom_score_adj").write_text("0\n")
    main(["host", "--root", str(root), "--format", "json"])
    out, _ = capsys.readouterr()
    json.loads(out)
    assert "5151" in out
    assert "hf_abcdefghij" not in out and "pw-in-json-99" not in out


class _Echo(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint whose reply echoes the key and carries terminal escapes."""

    def log_message(self, *a):
        return None

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        key = self.headers.get("Authorization", "")[7:]
        body = json.dumps({"choices": [{"message": {"content": f"your key is {key}\x1b]0;pwned\x07 and HF_TOKEN=hf_zzzzzzzzzzzzzzzzzzzzzzzz"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_bundle_ask_reply_is_redacted_and_stripped(capsys, tmp_path, monkeypatch):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        log = tmp_path / "vllm.log"
        log.write_text("INFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.8.5\n")
        monkeypatch.setenv("OOMGUARD_LLM_BASE_URL", f"http://127.0.0.1:{httpd.server_address[1]}")
        monkeypatch.setenv("OOMGUARD_LLM_API_KEY", "ask-endpoint-key-12345")
        monkeypatch.setenv("OOMGUARD_LLM_MODEL", "m")
        main(["bundle", str(log), "--ask"])
        out, err = capsys.readouterr()
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert "your key is" in out
    assert "ask-endpoint-key-12345" not in out + err
    assert "hf_zzzzzzzz" not in out and "\x1b" not in out and "\x07" not in out


def test_error_messages_are_redacted(capsys, tmp_path):
    rc = main(["check", str(tmp_path / "--api-key=s3cretKEYvalue")])
    out, err = capsys.readouterr()
    assert rc != 0 and "Traceback" not in err
    assert "s3cretKEYvalue" not in out + err


# --- properties -------------------------------------------------------------------------------

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
    max_leaves=20,
)
_secret = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", min_size=8, max_size=24).filter(
    lambda s: s[0].isalnum())  # a value starting with "-" after a flag reads as the next flag


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(value=_json_values, key=st.sampled_from(["api_key", "hf_token", "password", "HF_TOKEN", "--api-key"]),
       secret=_secret)
def test_redacted_structures_serialize_and_lose_the_secret(value, key, secret):
    assume(secret not in json.dumps(value))
    data = {"payload": value, key: secret, "nested": [{key: secret}], "text": f"--api-key {secret} and {key}={secret}"}
    out = json.dumps(redact_data(data))
    json.loads(out)
    assert secret not in out


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(prefix=st.text(max_size=40), suffix=st.text(max_size=40), secret=_secret,
       form=st.sampled_from(["--api-key {s}", "--api-key={s}", "HF_TOKEN={s}", "MY_SECRET='{s}'",
                             "'api_key': '{s}'", '"password": "{s}"', "https://u:{s}@h/", "Authorization: Bearer {s}"]))
def test_secret_forms_are_masked_in_any_surrounding_text(prefix, suffix, secret, form):
    text = f"{prefix} {form.format(s=secret)} {suffix}"
    assume(text.count(secret) == 1)  # the secret itself, not the same characters elsewhere
    assert secret not in redact_text(text)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(text=st.text(max_size=200))
def test_terminal_text_never_keeps_a_control_character(text):
    out = safe_terminal_text(text)
    assert not any((ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in out)


def test_argparse_errors_are_redacted(capsys):
    # main() returns argparse's status (2) instead of raising SystemExit
    code = main(["probe", "--base-url", "http://127.0.0.1:9", "--bogus", "--api-key", "s3cretKEYvalue"])
    _, err = capsys.readouterr()
    assert code == 2 and "--bogus" in err and "s3cretKEYvalue" not in err
    assert main(["plan", "--gpu-memory-gib", "sk-proj-abcdefghijklmnopqrstu"]) == 2
    _, err = capsys.readouterr()
    assert "abcdefghijklmnopqrstu" not in err and "--gpu-memory-gib" in err


@pytest.mark.parametrize("name, value, secret", [
    ("LMCACHE_REMOTE_URL", "redis://alice:pw@redis:6379", True),   # by value: URL userinfo
    ("otlp_traces_endpoint", "https://bob:pw@otel:4317", True),
    ("otlp_traces_endpoint", "https://otel:4317", False),
    ("VLLM_HTTP_HEADERS", "Authorization: Bearer abcdefgh1234", True),
    ("served_model_name", "sk-abcdefghijklmnopqrstuvwx", True),      # a key shape
    ("kv_transfer_config", {"kv_connector": "X", "kv_connector_extra_config": {"password": "p"}}, True),
    ("kv_transfer_config", '{"kv_connector":"X","api_key":"abcd1234"}', True),
    ("kv_transfer_config", {"kv_connector": "X", "kv_role": "kv_both"}, False),
    ("VLLM_AUTH_ENABLED", "1", False),                               # a short count under a secret name
    ("api_key", True, False), ("allow_credentials", True, False),    # booleans are never secrets
    ("LMCACHE_KEY", "keysecretDDD", True), ("HF_TOKEN", "", False), ("api_key", ["k1k2k3k4"], True),
])
def test_is_secret_by_name_and_by_value(name, value, secret):
    """The one decision check, bundle and export share (oomguard.redact.is_secret)."""
    from oomguard.redact import is_secret

    assert is_secret(name, value) is secret


def test_a_hub_token_glued_to_a_name_is_masked_in_fit_output(tmp_path):
    """Found by the fuzz campaign (seed 4747, launch-json-flags): a token written after an underscore
    (``hf_token_hf_...`` inside a JSON-valued flag) has no word boundary before it, and fit --format json
    printed it. Through the real CLI."""
    import subprocess
    import sys

    token = "hf_zqMENDhftokenABCDEFGH1234"
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve Qwen/Qwen3-8B --max-model-len 8192 "
                      f"--speculative-config='{{\"extra\": [{{\"note\": [\"hf_token_{token}\"]}}]}}'\n")
    p = subprocess.run([sys.executable, "-m", "oomguard.cli.main", "fit", "--from", str(script), "--gpu", "A100-80GB",
                        "--format", "json"], capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1, 2), p.stderr
    assert token not in p.stdout + p.stderr
    assert redact_text(f"x_{token}") != f"x_{token}"
