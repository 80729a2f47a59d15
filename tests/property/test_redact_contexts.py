"""Property: every token shape, in every context and glued to any neighbour, is masked by the one redactor,
through the real CLI of check, export, bundle and diagnose; ordinary prose is left as it was (issue 20.5).

A token glued to other text (``HF_TOKEN=xhf_...``, ``%3Dsk-...``, ``token_ghp_...``, ``AKIA...EXAMPLE_suffix``)
has no word boundary, and the shapes used to ask for one. The glues are the characters text puts there: ``=``,
``:``, quotes, ``/``, ``_``, letters, digits, URL escapes. The planted tokens are made up here from their public
formats; none is a real credential.
"""

from __future__ import annotations

import itertools
import json

import pytest

from oomguard.cli.main import main
from oomguard.redact import redact_data, redact_text

# The random part of each token is what must never appear; the vendor's prefix may stay ("sk-***").
_R = "Qz7Xk2Vb9Nm4Lp8Ht3Wd6Ry1"  # 24 random-looking letters and digits
TOKENS = {
    "github-classic": "ghp_" + _R + "Ab12Cd34Ef56",
    "github-pat": "github_pat_11" + _R + "_" + _R.lower() + "9Zz",
    "aws-akia": "AKIA" + _R.upper()[:16],
    "aws-asia": "ASIA" + _R.upper()[4:20],
    "huggingface": "hf_" + _R + "aBcDeFgHiJ",
    "openai": "sk-" + _R + _R[::-1],
    "openai-project": "sk-proj-" + _R + "_" + _R[::-1] + "-T3st",
    "slack-bot": "xoxb-123456789012-1234567890123-" + _R,
    "slack-user": "xoxp-123456789012-1234567890123-1234567890123-" + _R.lower() + "0f0f",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI" + _R + "In0." + _R + "-_" + _R[:8],
}


def _tell(token: str) -> str:
    """The part of a token that gives it away: its last 12 characters (the prefix is public)."""
    return token[-12:]


GLUES = [("", ""), ("=", ""), ("", "="), (":", ""), ("'", "'"), ('"', '"'), ("/", "/"), ("_", "_"), ("x", ""),
         ("", "y"), ("abc", "def"), ("%3D", "%26"), ("1", "")]

# The places a token stands in what users feed oomguard; {t} is the glued token.
CONTEXTS = {
    "log line": "INFO 01-01 00:00:00 api_server.py:1] loading the model with {t} now",
    "prose": "I set it to {t} and the server still refused me",
    "shell export": "export GH_TOKEN={t}",
    "shell export, other name": "export UPSTREAM={t}",
    "yaml": "  token: {t}",
    "yaml, other key": "  note: {t}",
    "json-valued flag": """--kv-transfer-config '{{"kv_connector":"X","extra":{{"note":"{t}"}}}}'""",
    "url userinfo": "https://user:{t}@hub.example.com/models",
    "url query": "https://hub.example.com/api?access={t}&x=1",
    "authorization header": "Authorization: Bearer {t}",
    "authorization header, glued": "HTTP_AUTHORIZATION:Bearer {t}",
    "json": '{{"headers": {{"X-Note": "{t}"}}, "n": 1}}',
}


@pytest.mark.parametrize("shape", sorted(TOKENS))
def test_a_token_in_any_context_glued_to_anything_is_masked(shape):
    token = TOKENS[shape]
    leaks = []
    for (before, after), (where, template) in itertools.product(GLUES, CONTEXTS.items()):
        text = template.format(t=before + token + after)
        for out in (redact_text(text), json.dumps(redact_data({"line": text}))):
            if _tell(token) in out:
                leaks.append(f"{where} {before!r}+token+{after!r}: {out}")
    assert not leaks, "\n".join(leaks[:10])


@pytest.mark.parametrize("text", ["X-Authorization: plainvalue42", "X-Custom-Authorization=Basic dXNlcjpwYXNz99",
                                  "Proxy-Authorization: Bearer plainvalue42", "HTTP_AUTHORIZATION=Basic plainvalue42",
                                  "my-x-api-key: plainvalue42", "x_Bearer plainvalue42", "_bearer Bearer plainvalue42", '"Authorization":"Bearer plainvalue42"'])
def test_a_header_named_with_a_prefix_masks_a_value_of_no_known_shape(text):
    out = redact_text(text)
    assert "plainvalue42" not in out and "dXNlcjpwYXNz99" not in out and "***" in out, out


# Ordinary text (logs, docs, oomguard's own messages) that holds secret-sounding names, the vendors' prefixes
# inside words, and flags named in sentences: none of it is a value.
PROSE = [
    "use --api-key to set it",
    "use --api-key when the server is public",
    "set --api-key (or VLLM_API_KEY) before you start",
    "with --api-key everything is protected",
    "pass --hf-token, then restart",
    "--api-key is given 2 times; the last one wins",
    "the --api-key value is not checked here",
    "a Bearer token in the Authorization header",
    "the Authorization: header carries it",
    "token: the one from the Hub",
    "api_key: see below",
    "if --api-key: then it must be secret",
    "HF_TOKEN is not set; set HF_TOKEN before launch",
    "the task-management-system-v2 uses disk-usage-monitoring-service and graphf_layout_engine_config",
    "ASIAN characters and ASKIA are words, so is AKIA in a sentence",
    "max_tokens=512 max_num_batched_tokens: 8192 num_key_value_heads=8",
    "see https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html#api-key for the details",
    "xoxo and skeleton-key-management-overview are fine",
]


@pytest.mark.parametrize("sentence", PROSE)
def test_ordinary_prose_is_not_masked(sentence):
    assert redact_text(sentence) == sentence


# --- through the CLI ---------------------------------------------------------------------------


def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return rc, out + err


def _assert_no_token(text: str, where: str) -> None:
    leaked = [shape for shape, token in TOKENS.items() if _tell(token) in text]
    assert not leaked, f"{where}: {leaked} leaked\n{text[:3000]}"


def _launch_script() -> str:
    """One launch holding every token shape in each place a launch can hold it, glued to its neighbours.

    Each token also stands in a duplicated --served-model-name, so check echoes it (the duplicate-flag finding
    names both values) and the test cannot pass by printing nothing."""
    lines = ["#!/bin/bash"]
    flags = []
    for i, (before, after) in enumerate(GLUES[:8]):
        for j, token in enumerate(TOKENS.values()):
            g = before + token + after
            if i == 0:
                lines.append(f"export GH_TOKEN_{j}={g.replace(chr(39), '').replace(chr(34), '')}")
                lines.append(f"export UPSTREAM_{j}=https://u:{token}@h.example:6379")
                lines.append(f'export VLLM_HTTP_HEADERS_{j}="Authorization: Bearer {token}"')
            safe = g.replace("'", "").replace('"', "")
            flags.append(f"--served-model-name 'm{i}{j}_{safe}'")
    flags.append("""--kv-transfer-config '{"kv_connector":"X","kv_connector_extra_config":{"note":"a_%s","u":"%s"}}'"""
                 % (TOKENS["openai-project"], TOKENS["github-pat"]))
    flags.append(f"--otlp-traces-endpoint https://{TOKENS['jwt']}@otel.example:4317")
    lines.append("vllm serve Qwen/Qwen3-8B " + " ".join(flags) + " --max-model-len 40960000")
    return "\n".join(lines) + "\n"


_OOM = ("ERROR 01-01 00:00:03 engine.py:4] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 79.15 GiB of which 1.2 GiB is free.")


def _log() -> str:
    out = ["INFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.8.5"]
    for (before, after), token in itertools.product(GLUES, TOKENS.values()):
        for template in CONTEXTS.values():
            out.append(template.format(t=before + token + after))
    out.append(_OOM + f" url=https://h/x?k=x{TOKENS['openai']}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_check_never_prints_a_token(capsys, tmp_path, fmt):
    script = tmp_path / "start_api.sh"
    script.write_text(_launch_script())
    rc, out = _run(capsys, ["check", str(script), "--gpu", "A100-80GB", "--format", fmt])
    assert rc in (0, 1)
    _assert_no_token(out, f"check --format {fmt}")
    assert "served-model-name" in out and "***" in out  # the values were printed, masked


@pytest.mark.parametrize("target", ["systemd", "docker", "compose", "kubernetes", "env", "yaml"])
def test_export_never_writes_a_token(capsys, tmp_path, target):
    script = tmp_path / "start_api.sh"
    script.write_text(_launch_script())
    rc, out = _run(capsys, ["export", "launch", str(script), "--to", target])
    assert rc == 0, out
    _assert_no_token(out, f"export --to {target}")
    assert "SECRET_SERVED_MODEL_NAME" in out  # the glued values were seen as secrets and moved out


def test_bundle_and_diagnose_never_print_a_token_and_keep_prose(capsys, tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(_log())
    rc, out = _run(capsys, ["bundle", str(log), "--max-bytes", str(8 << 20)])
    assert rc in (0, 1)
    _assert_no_token(out, "bundle")
    for fmt in ("text", "json"):
        rc, out = _run(capsys, ["diagnose", str(log), "--format", fmt])
        assert rc in (0, 1, 4), out
        _assert_no_token(out, f"diagnose --format {fmt}")
        assert "***" in out  # the evidence line was quoted, masked


@pytest.mark.parametrize("chunk", range(0, len(PROSE), 3))
def test_bundle_quotes_ordinary_prose_as_it_was(capsys, tmp_path, chunk):
    """The excerpt around the error holds three lines before it: three sentences a log."""
    sentences = PROSE[chunk:chunk + 3]
    log = tmp_path / "vllm.log"
    log.write_text("\n".join([*sentences, _OOM]) + "\n")
    rc, out = _run(capsys, ["bundle", str(log)])
    assert rc in (0, 1)
    for sentence in sentences:
        assert sentence in out, sentence
