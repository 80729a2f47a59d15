"""Property: no value of a launch becomes structure in any export target, and no secret is written.

Hostile text (control characters, U+0085/U+2028/U+2029, quotes, ``$``, ``%``, backticks,
``$(...)``, YAML markers, ``: ``, ``#``) is drawn for the model id, free-text flags, list
flags, a JSON-valued flag, environment values and the launch file's name, and planted
secrets for credential-looking names and values. For every target, the export is either
refused with an ``InputError`` (one line, naming a field, never the value) or:

- its text parses with the target's own grammar to exactly what the renderer meant
  (``readback.check_structure``) and back to the same launch (``readback.verify``);
- an oracle independent of the renderer finds the fixed shape: one ``ExecStart=`` and only
  the unit's own keys; one shell command; one YAML document with the fixed top-level keys;
- no planted secret value appears in the text.

A fixed, derandomized budget keeps this to seconds in CI.
"""

from __future__ import annotations

import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oomguard.errors import InputError
from oomguard.export.launch import ExportOptions, Target, render_env, render_launch
from oomguard.export.readback import verify
from oomguard.export.systemd import parse_unit
from oomguard.inputs.launch import Launch
from oomguard.inputs.shell import lex

VERSION = "0.32.0"
EXAMPLES = int(__import__("os").environ.get("OOMGUARD_EXPORT_EXAMPLES", "40"))  # the long run: 2000

_NASTY = ["\n", "\r", "\x85", "\u2028", "\u2029", "\t", "\x1b[31m", "\u202e", "%", "%n", "%%", "$", "${X}", "$$", "$(id)",
          "`id`", "'", '"', "\\", "---", "...", ": ", " #", "#", "[Service]", "ExecStartPre=/bin/evil", ";", "&&", "|",
          "\ufeff", "\x7f", "é", "\x00"]
hostile = st.lists(st.one_of(st.sampled_from(_NASTY), st.text(max_size=6)), max_size=6).map("".join)
PLANTED = "zqPROPsecret4471"
# values that are secret whatever they are called (the bare value is secret under a secret name only)
shaped_secrets = st.sampled_from([f"redis://u:{PLANTED}@h:1", f"https://{PLANTED}@otel:4317", f"Bearer {PLANTED}",
                                  f"sk-{PLANTED}ABCDEFGH"])
secret_values = st.one_of(st.just(PLANTED), shaped_secrets)
STR_FLAGS = ["chat_template", "response_role", "root_path", "tokenizer", "revision", "download_dir"]
UNIT_KEYS = {"Description", "After", "Wants", "StartLimitIntervalSec", "StartLimitBurst", "Type", "User", "Environment",
             "EnvironmentFile", "ExecStart", "Restart", "RestartSec", "TimeoutStartSec", "MemoryMax", "OOMScoreAdjust",
             "LimitNOFILE", "WantedBy"}


@st.composite
def launches(draw):
    flags = {d: draw(hostile) for d in draw(st.lists(st.sampled_from(STR_FLAGS), max_size=3, unique=True))}
    if draw(st.booleans()):
        flags["served_model_name"] = draw(st.lists(hostile, min_size=1, max_size=2))
    if draw(st.booleans()):
        flags["kv_transfer_config"] = {"kv_connector": draw(hostile), "kv_role": "kv_both",
                                       "kv_connector_extra_config": {draw(hostile) or "k": draw(hostile)}}
    if draw(st.booleans()):
        flags["otlp_traces_endpoint"] = draw(shaped_secrets)
    if draw(st.booleans()):
        flags["api_key"] = [draw(secret_values)]
    env = {}
    if draw(st.booleans()):
        env["VLLM_HOST_IP"] = draw(hostile)
    if draw(st.booleans()):
        env["LMCACHE_REMOTE_URL"] = f"redis://a:{PLANTED}@r:1"
    if draw(st.booleans()):
        env[draw(st.sampled_from(["LMCACHE_KEY", "VLLM_DB_PASSWD", "VLLM_AUTH_HEADER", "VLLM_GCS_CREDENTIALS"]))] = PLANTED
    model = draw(st.one_of(st.just("Qwen/Qwen3-8B"), hostile.filter(bool)))
    return Launch("command", None, model, flags=flags, env=env, version=VERSION), draw(hostile)


def _oracle(target: Target, text: str) -> None:
    """The fixed shape of each target, judged without the renderer's own structure."""
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]", text)
    if target is Target.SYSTEMD:
        entries = parse_unit(text)
        assert [e.section for e in entries if e.kind == "section"] == ["Unit", "Service", "Install"]
        keys = [e.key for e in entries if e.kind == "setting"]
        assert set(keys) <= UNIT_KEYS and keys.count("ExecStart") == 1
    elif target is Target.DOCKER:
        script = lex(text, path=None)
        assert len(script.commands) == 1 and script.commands[0].words[0].text == "docker"
    elif target is Target.COMPOSE:
        (doc,) = list(yaml.safe_load_all(text))
        assert set(doc) == {"services"} and len(doc["services"]) == 1
    elif target is Target.KUBERNETES:
        (doc,) = list(yaml.safe_load_all(text))
        assert set(doc) == {"apiVersion", "kind", "metadata", "spec"} and doc["kind"] == "Deployment"
    elif target is Target.YAML:
        (doc,) = list(yaml.safe_load_all(text))
        assert "model" in doc
    else:
        for line in text.rstrip("\n").split("\n"):
            assert line.startswith("#") or re.match(r"[A-Za-z_][A-Za-z0-9_]*=", line), line


def _one(target: Target, launch: Launch, source: str) -> None:
    opts = ExportOptions(vllm_version=VERSION, source=source or None)
    try:
        rendered = render_env(launch, opts) if target is Target.ENV else render_launch(launch, target, opts)
    except InputError as exc:
        msg = str(exc)
        assert "\n" not in msg and PLANTED not in msg
        assert re.search(r"--[a-z-]+|the model|environment variable|NUL", msg), msg
        return
    assert verify(rendered, target, launch, VERSION) == [], rendered.text
    _oracle(target, rendered.text)
    assert PLANTED not in rendered.text
    assert not any(PLANTED in n for n in rendered.notes)


def _make(target: Target):
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=launches())
    def test(case):
        launch, source = case
        _one(target, launch, source)

    test.__name__ = f"test_no_value_becomes_structure_{target.value}"
    return test


for _target in Target:
    globals()[f"test_no_value_becomes_structure_{_target.value}"] = _make(_target)


def test_the_strategy_reaches_refusals_and_escapes():
    """The budget above is not vacuous: the hostile alphabet both escapes and refuses."""
    nel = Launch("command", None, "m\x85x", flags={}, env={}, version=VERSION)
    for target in (Target.SYSTEMD, Target.COMPOSE, Target.KUBERNETES, Target.YAML):
        _one(target, nel, "")
    try:
        render_launch(nel, Target.DOCKER, ExportOptions(vllm_version=VERSION))
    except InputError as exc:
        assert "--model" in str(exc)
    else:
        raise AssertionError("docker must refuse U+0085")
