"""Issue 20 item 5: what `oomguard export launch` writes is safe by construction.

Reproducers through the real CLI (a subprocess, as a user runs it): hostile model ids,
launch file names and values must never become structure in the export (an
``ExecStartPre=`` line in a unit, a second shell command, a YAML key), secrets must never
appear in what is printed or exported, and ``check --fix --in-place`` must never replace a
manifest with another format. Each written file is parsed with an oracle independent of the
renderer (systemd-analyze when installed, oomguard's shell lexer, PyYAML) and must have
exactly the intended shape.

Before the fix (main at e772027), for the record of the report:
- model "m\\n[Service]\\nExecStartPre=/bin/evil": systemd Description= broke into an
  ExecStartPre= line (exit 0);
- launch file name "x\\nExecStartPre=evil\\nfoo: bar\\ntouch pwned\\n#.sh": the header comment
  became an ExecStartPre= line (systemd), a `touch pwned` command (docker) and a top-level
  `foo: bar` key (compose, Kubernetes), exit 0;
- a CR in the model: systemd ends unit lines at CR too (systemd-analyze confirms), Description=
  carried it raw;
- LMCACHE_KEY, LMCACHE_REMOTE_URL=redis://user:pass@..., --otlp-traces-endpoint
  https://user:pass@... were written inline (exit 0); `--api-key sk-...` exited 3;
  `served-model-name:` in a --config YAML exited 3; `--api-key "$VLLM_API_KEY"` exited 2;
- `check deploy.yaml --fix --in-place` replaced the Deployment with one shell line.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oomguard.export.systemd import parse_unit, split_command
from oomguard.inputs.shell import lex

ROOT = Path(__file__).resolve().parents[3]
TARGETS = ("systemd", "docker", "compose", "kubernetes", "env", "yaml")
UNIT_KEYS = {
    "Unit": {"Description", "After", "Wants", "StartLimitIntervalSec", "StartLimitBurst"},
    "Service": {"Type", "User", "Environment", "EnvironmentFile", "ExecStart", "Restart", "RestartSec",
                "TimeoutStartSec", "MemoryMax", "OOMScoreAdjust", "LimitNOFILE"},
    "Install": {"WantedBy"},
}
SERVICE_KEYS = {"image", "command", "ipc", "ports", "volumes", "environment", "deploy", "restart"}
CONTAINER_KEYS = {"name", "image", "args", "ports", "resources", "volumeMounts", "readinessProbe", "startupProbe",
                  "livenessProbe", "env"}


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oomguard.cli.main", *args], capture_output=True, text=True,
                          timeout=120, cwd=str(cwd or ROOT))


def export(target: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run("export", "launch", "--to", target, *args, cwd=cwd)


def export_in_process(capsys, target: str, *args: str) -> subprocess.CompletedProcess:
    """The same CLI entry point in this process (for the wider matrices: a subprocess costs ~0.5 s)."""
    from oomguard.cli.main import main

    rc = main(["export", "launch", "--to", target, *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([], rc, out, err)


# -- independent oracles: what the written text IS in its own grammar ------------------------


def unit_shape(text: str) -> tuple[list[str], list[str]]:
    """(sections, ExecStart argv) of a unit, asserting it has only the settings the export writes."""
    entries = parse_unit(text)
    sections = [e.section for e in entries if e.kind == "section"]
    assert sections == ["Unit", "Service", "Install"], sections
    for e in entries:
        if e.kind == "setting":
            assert e.section in UNIT_KEYS and e.key in UNIT_KEYS[e.section], (e.section, e.key)
    (exec_start,) = [e.value for e in entries if e.kind == "setting" and e.key == "ExecStart"]
    assert not re.search(r"[\r\x00\x85\u2028\u2029]", text)
    return sections, [str(w) for w in split_command(exec_start)]


def systemd_analyze(tmp_path: Path, text: str) -> list[str]:
    """What systemd itself says about the unit (only lines about this file: no PID 1 here)."""
    unit = tmp_path / "vllm-test.service"
    unit.write_text(text.replace("/usr/local/bin/vllm", "/bin/true"))
    p = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60)
    return [ln for ln in (p.stdout + p.stderr).splitlines() if unit.name in ln and "User" not in ln]


def docker_words(text: str) -> list[str]:
    script = lex(text, path=None)
    assert len(script.commands) == 1, [c.words[0].text for c in script.commands]
    assert all(c.strip().startswith("#") for _, c in script.comments)
    assert len(script.comments) == len([ln for ln in text.split("\n") if ln.startswith("#")])
    return [w.text for w in script.commands[0].words]


def compose_service(text: str) -> dict:
    docs = list(yaml.safe_load_all(text))
    assert len(docs) == 1 and set(docs[0]) == {"services"}, docs
    (service,) = docs[0]["services"].values()
    assert set(service) <= SERVICE_KEYS, set(service)
    return service


def k8s_container(text: str) -> dict:
    docs = list(yaml.safe_load_all(text))
    assert len(docs) == 1 and set(docs[0]) == {"apiVersion", "kind", "metadata", "spec"}, docs
    spec = docs[0]["spec"]
    assert set(spec) == {"replicas", "selector", "template"}
    (container,) = spec["template"]["spec"]["containers"]
    assert set(container) <= CONTAINER_KEYS, set(container)
    return container


def env_lines(text: str) -> dict[str, str]:
    env = {}
    for line in text.rstrip("\n").split("\n"):
        if line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        assert m, line
        (value,) = shlex.split(m.group(2)) or [""]
        env[m.group(1)] = value
    return env


def model_of(target: str, text: str) -> str:
    if target == "systemd":
        return unit_shape(text)[1][2]
    if target == "docker":
        words = docker_words(text)
        return words[words.index("--model") + 1]
    if target == "compose":
        cmd = compose_service(text)["command"]
        return cmd[cmd.index("--model") + 1].replace("$$", "$")
    if target == "kubernetes":
        args = k8s_container(text)["args"]
        return args[args.index("--model") + 1].replace("$$", "$")
    if target == "yaml":
        data = yaml.safe_load(text)
        return data["model"]
    raise AssertionError(target)


# -- injection ------------------------------------------------------------------------------

HOSTILE_MODELS = [
    "m\n[Service]\nExecStartPre=/bin/evil",
    "m\rExecStartPre=/bin/evil",
    "m\x85ExecStartPre=/bin/evil",
    "m\u2028ExecStartPre=/bin/evil",
    "m'; touch /tmp/pwned; echo '",
    "m`touch /tmp/pwned`$(touch /tmp/pwned)",
    "m %n %% $HOME ${HOME} $$",
    'm "quoted" \\ back',
    "m\n---\nkind: Secret",
    "m\n...\n",
    "m: value # comment",
]
SUBPROCESS_MODELS = HOSTILE_MODELS[:3]  # the reported reproducers; the rest run in-process (same CLI entry)


def _model_case(target: str, model: str, tmp_path: Path, rc: int, out: str, err: str) -> None:
    if rc == 2:
        # refused: one line naming the field, never echoing the value
        assert target == "docker" and ("\x85" in model or "\u2028" in model), (model, err)
        assert len(err.strip().splitlines()) == 1 and "--model" in err and "ExecStartPre" not in err
        return
    assert rc == 0, (model, err)
    assert model_of(target, out) == model, (model, out)
    if target == "systemd" and model in SUBPROCESS_MODELS and shutil.which("systemd-analyze"):
        assert systemd_analyze(tmp_path, out) == [], (model, out)


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "env"])
def test_hostile_model_ids_stay_one_value(target, tmp_path, capsys):
    from oomguard.cli.main import main

    for model in SUBPROCESS_MODELS:
        p = export(target, "--", "vllm", "serve", model, "--max-model-len", "4096")
        _model_case(target, model, tmp_path, p.returncode, p.stdout, p.stderr)
    for model in HOSTILE_MODELS[3:]:
        rc = main(["export", "launch", "--to", target, "--", "vllm", "serve", model, "--max-model-len", "4096"])
        out, err = capsys.readouterr()
        _model_case(target, model, tmp_path, rc, out, err)


def test_cr_and_newline_never_reach_a_unit_line(tmp_path):
    p = export("systemd", "--", "vllm", "serve", "m\r\n[Service]\nExecStartPre=/bin/evil")
    assert p.returncode == 0, p.stderr
    assert "\r" not in p.stdout
    lines = p.stdout.split("\n")
    assert not any(line.startswith(("ExecStartPre", "[Service]ExecStartPre")) for line in lines)
    assert sum(line.startswith("[Service]") for line in lines) == 1
    assert [line for line in lines if line.startswith("Description=")] == [
        "Description=vLLM OpenAI-compatible server (m\\r\\n[Service]\\nExecStartPre=/bin/evil)"]


HOSTILE_FILE = "x\nExecStartPre=evil\nfoo: bar\ntouch pwned\n#.sh"


@pytest.mark.parametrize("target", TARGETS)
def test_a_hostile_launch_file_name_stays_in_its_comment(target, tmp_path):
    (tmp_path / HOSTILE_FILE).write_text("vllm serve m --max-model-len 4096\n")
    p = export(target, HOSTILE_FILE, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    first = p.stdout.split("\n")[0]
    assert first.startswith("# generated by") and "\\nExecStartPre=evil\\nfoo: bar\\ntouch pwned" in first
    assert "\ntouch pwned" not in p.stdout and "\nfoo: bar" not in p.stdout and "\nExecStartPre" not in p.stdout
    if target == "systemd":
        unit_shape(p.stdout)
    elif target == "docker":
        assert "touch" not in docker_words(p.stdout)
    elif target == "compose":
        compose_service(p.stdout)
    elif target == "kubernetes":
        k8s_container(p.stdout)
    elif target == "yaml":
        assert set(yaml.safe_load(p.stdout)) == {"model", "max-model-len"}
    else:
        assert env_lines(p.stdout) == {}


HOSTILE_VALUES = {
    "newline": "a\nb", "cr": "a\rb", "nel": "a\x85b", "line-separator": "a\u2028b", "tab": "a\tb",
    "percent": "50% %n %%", "dollar": "$HOME ${X} $$ $(id)", "quotes": "it's \"q\"", "backtick": "`id`",
    "yaml-doc": "---", "yaml-end": "...", "yaml-colon": "k: v", "hash": "a #b",
}
# one free-text flag of vLLM 0.32 per hostile value, so that one export carries them all
STRING_FLAGS = ["--chat-template", "--response-role", "--tool-call-parser", "--root-path", "--tokenizer",
                "--revision", "--code-revision", "--tokenizer-revision", "--hf-config-path", "--download-dir",
                "--generation-config", "--worker-extension-cls", "--log-config-file"]
SHELL_UNSAFE = ("nel", "line-separator")  # refused by the shell targets (docker, env)


def value_of(argv: list[str], option: str) -> str:
    for i, w in enumerate(argv):
        if w == option:
            return argv[i + 1]
        if w.startswith(option + "="):
            return w[len(option) + 1 :]
    raise AssertionError(f"{option} not in {argv}")


def _script(values: dict[str, str]) -> str:
    env_ok = {k: v for k, v in values.items() if not re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", v)}
    lines = [f"export VLLM_X_{k.upper().replace('-', '_')}={shlex.quote(v)}" for k, v in env_ok.items()]
    # A value that argparse would read as an option ("---") is attached with "=", as vLLM needs it.
    words = [f"{flag}={_ansi(v)}" if v.startswith("-") and " " not in v else f"{flag} {_ansi(v)}"
             for flag, v in zip(STRING_FLAGS, values.values())]
    return "\n".join(lines) + "\nvllm serve m \\\n  " + " \\\n  ".join(words) + "\n"


@pytest.mark.parametrize("target", TARGETS)
def test_hostile_flag_and_env_values_round_trip_or_are_refused(target, tmp_path):
    """Every hostile value in a free-text flag (and, the printable ones, in the environment): the
    export reads back to exactly that value, or is refused with one line naming the field."""
    values = dict(HOSTILE_VALUES)
    script = tmp_path / "start_api.sh"
    if target in ("docker", "env"):
        for name in SHELL_UNSAFE:
            script.write_text(_script({name: HOSTILE_VALUES[name]}))
            p = export(target, str(script), "--vllm-version", "0.32.0")
            if target == "env":  # the flags are only a comment there: shown escaped
                assert p.returncode == 0 and "\\x85" in p.stdout + "\\x85" or "\\u2028" in p.stdout, p.stderr
                continue
            assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
            assert "--chat-template" in p.stderr and HOSTILE_VALUES[name] not in p.stderr
        values = {k: v for k, v in values.items() if k not in SHELL_UNSAFE}
    script.write_text(_script(values))
    p = export(target, str(script), "--vllm-version", "0.32.0")
    assert p.returncode == 0, (target, p.stderr)
    out = p.stdout
    env_want = {f"VLLM_X_{k.upper().replace('-', '_')}": v for k, v in values.items()
                if not re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", v)}
    flags_want = dict(zip(STRING_FLAGS, values.values()))
    if target == "systemd":
        from oomguard.export.systemd import environment

        _, argv = unit_shape(out)
        assert environment(out) == env_want
    elif target == "docker":
        argv = docker_words(out)
        assert {w.split("=", 1)[0]: w.split("=", 1)[1] for i, w in enumerate(argv) if argv[i - 1] == "-e"} == env_want
    elif target == "compose":
        svc = compose_service(out)
        argv = [w.replace("$$", "$") for w in svc["command"]]
        assert {k: v.replace("$$", "$") for k, v in svc["environment"].items()} == env_want
    elif target == "kubernetes":
        c = k8s_container(out)
        argv = [w.replace("$$", "$") for w in c["args"]]
        assert {e["name"]: e["value"].replace("$$", "$") for e in c["env"]} == env_want
    elif target == "env":
        assert env_lines(out) == env_want
        return
    else:
        data = yaml.safe_load(out)
        argv = [w for k, v in data.items() for w in ("--" + k, v)]
    for flag, value in flags_want.items():
        assert value_of(argv, flag) == value, (flag, value, out)


def _ansi(value: str) -> str:
    """A bash word for ``value`` (ANSI-C quoting carries control characters into the script)."""
    out = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f else
                  (f"\\u{ord(c):04x}" if ord(c) in (0x2028, 0x2029) else ("\\'" if c == "'" else ("\\\\" if c == "\\" else c)))
                  for c in value)
    return "$'" + out + "'"


@pytest.mark.parametrize("target", TARGETS)
def test_nul_is_refused_everywhere(target, tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text("vllm serve m --served-model-name $'a\\x00b'\n")
    p = export(target, str(script))
    assert p.returncode == 2 and "NUL" in p.stderr and "--served-model-name" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_bad_environment_names_and_values_are_refused(tmp_path, capsys):
    script = tmp_path / "start_api.sh"
    script.write_text("export VLLM_X=$'a\\nb'\nvllm serve m\n")
    p = export("systemd", str(script))
    assert p.returncode == 2 and "VLLM_X" in p.stderr and "U+000A" in p.stderr and "a\nb" not in p.stderr
    p = export_in_process(capsys, "env", str(script))
    assert p.returncode == 2 and "VLLM_X" in p.stderr
    for target in ("docker", "compose", "kubernetes"):  # these carry it escaped
        assert export_in_process(capsys, target, str(script)).returncode == 0


@pytest.mark.parametrize("option, value", [("--image", "img\nfoo: bar"), ("--image", "img $(id)"),
                                           ("--vllm-bin", "/bin/vllm\nExecStartPre=/bin/evil"),
                                           ("--vllm-bin", "-/bin/vllm"), ("--user", "root\nExecStartPre=x")])
def test_hostile_options_are_refused(option, value):
    target = "systemd" if option in ("--vllm-bin", "--user") else "compose"
    p = export(target, option, value, "--", "vllm", "serve", "m")
    assert p.returncode == 2 and option in p.stderr and len(p.stderr.strip().splitlines()) == 1


# -- leaks ----------------------------------------------------------------------------------

# (the launch reader keeps the variables that change vLLM's behaviour: VLLM_*, LMCACHE_*, NCCL_* ...)
SECRETS = {
    "LMCACHE_REDIS_PASSWD": "pw1secretAAA",
    "LMCACHE_AUTH_HEADER": "Bearer authsecretBBBB",
    "VLLM_GCS_CREDENTIALS": "credsecretCCC",
    "LMCACHE_KEY": "keysecretDDD",
    "VLLM_DB_PASSWORD_FILE": "pwfileEEE",
    "LMCACHE_REMOTE_URL": "redis://alice:urlsecretFFF@redis:6379",
    "VLLM_S3_SECRET": "s3secretHHH",
    "VLLM_HTTP_HEADERS": "Authorization: Bearer hdrsecretOOOO",
}
LEAKY = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in SECRETS.items()) + (
    "vllm serve m --otlp-traces-endpoint https://bob:otlpsecretJJJ@otel:4317 --api-key sk-apikeysecretKKKKKKKKKKKK \\\n"
    "  --hf-token hf_tokensecretLLLLLLLLLLLLLLLL --max-model-len 4096 \\\n"
    "  --kv-transfer-config '{\"kv_connector\":\"LMCacheConnectorV1\",\"kv_role\":\"kv_both\","
    "\"kv_connector_extra_config\":{\"remote_url\":\"redis://u:jsonsecretMMM@r:1\",\"token\":\"tokensecretNNN\"}}'\n"
)
PLANTED = ["hdrsecretOOOO", "secretAAA", "secretBBBB", "secretCCC", "secretDDD", "pwfileEEE", "secretFFF", "secretHHH", "otlpsecretJJJ",
           "apikeysecretKKK", "tokensecretLLL", "jsonsecretMMM", "tokensecretNNN"]


@pytest.mark.parametrize("target", TARGETS)
def test_no_secret_reaches_an_export(target, tmp_path):
    script = tmp_path / "start_api.sh"
    script.write_text(LEAKY)
    secrets_file = tmp_path / "vllm.secrets"
    out = tmp_path / f"out.{target}"
    p = export(target, str(script), "--vllm-version", "0.32.0", "-o", str(out), "--secrets-file", str(secrets_file))
    assert p.returncode == 0, p.stderr
    written = out.read_text()
    for planted in PLANTED:
        assert planted not in p.stdout + p.stderr, (planted, p.stderr)
        if target != "env":  # `--to env -o FILE` is the env file: it holds them, mode 0600
            assert planted not in written, (planted, written)
    stored = env_lines(secrets_file.read_text() if target != "env" else written)
    assert stat.S_IMODE(os.stat(secrets_file if target != "env" else out).st_mode) == 0o600
    for k, v in SECRETS.items():
        assert stored[k] == v
    assert stored["VLLM_API_KEY"] == "sk-apikeysecretKKKKKKKKKKKK" and stored["HF_TOKEN"].startswith("hf_tokensecret")
    assert "redis://alice:urlsecretFFF@redis:6379" == stored["LMCACHE_REMOTE_URL"]
    assert "mode 0600" in p.stderr
    if target == "kubernetes":
        c = k8s_container(written)
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "valueFrom" in e}
        assert set(refs) >= set(SECRETS) | {"VLLM_API_KEY", "HF_TOKEN", "SECRET_OTLP_TRACES_ENDPOINT"}
        assert "$(SECRET_OTLP_TRACES_ENDPOINT)" in c["args"] and "$(SECRET_KV_TRANSFER_CONFIG)" in c["args"]
    if target == "systemd":
        assert "EnvironmentFile=" + str(secrets_file) in written  # required, not "-" optional
        assert "${SECRET_OTLP_TRACES_ENDPOINT}" in written


def test_printed_export_never_holds_the_values(tmp_path, capsys):
    script = tmp_path / "start_api.sh"
    script.write_text(LEAKY)
    for target in TARGETS:
        p = export_in_process(capsys, target, str(script), "--vllm-version", "0.32.0")
        assert p.returncode == 0, p.stderr
        for planted in PLANTED:
            assert planted not in p.stdout + p.stderr, (target, planted)
        assert "--secrets-file" in p.stderr or target == "env"


def test_check_masks_what_export_moves(tmp_path):
    """One redactor: every secret export moves out is one check masks."""
    script = tmp_path / "start_api.sh"
    script.write_text(LEAKY)
    p = run("check", str(script), "--vllm-version", "0.32.0", "--gpu", "A100-80GB", "--format", "json")
    for planted in PLANTED:
        assert planted not in p.stdout + p.stderr, planted


@pytest.mark.parametrize("target", TARGETS)
def test_ordinary_credential_launches_export(target, tmp_path, capsys):
    """Issue 17: `--api-key` and `served-model-name` in a --config YAML exported with exit 3."""
    cases = {
        "k1.sh": 'vllm serve m --api-key "$VLLM_API_KEY" --max-model-len 4096\n',
        "k2.sh": "vllm serve m --api-key sk-abcdefgh1234567890abcdef\n",
        "k3.yaml": "model: m\nserved-model-name: foo\napi-key: abcdefgh123\nmax-model-len: 4096\n",
        "k4.sh": 'vllm serve m --api-key "$MY_KEY"\n',
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        p = (export if name == "k2.sh" else lambda *a: export_in_process(capsys, *a))(target, str(tmp_path / name))
        assert p.returncode == 0, (name, p.stderr)
        assert "sk-abcdefgh" not in p.stdout + p.stderr and "abcdefgh123" not in p.stdout + p.stderr
        if target == "kubernetes" and name != "k4.sh":
            env = k8s_container(p.stdout)["env"]
            assert {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {"name": "vllm-secrets", "key": "VLLM_API_KEY"}}} in env
            assert "--api-key" not in k8s_container(p.stdout)["args"]
        if target == "systemd" and name == "k4.sh":
            assert "--api-key ${MY_KEY}" in p.stdout


# -- data loss ------------------------------------------------------------------------------


@pytest.mark.parametrize("in_place", [True, False])
def test_check_fix_keeps_an_exported_manifest_a_manifest(tmp_path, in_place):
    """`check --fix [--in-place]` on an exported Deployment writes a Deployment (the launch
    engineer's write-back), never a shell line; the exported manifest stays one document."""
    dep = tmp_path / "deploy.yaml"
    p = export("kubernetes", "-o", str(dep), "--", "vllm", "serve", "m", "--max-model-len", "1048576",
               "--max-num-batched-tokens", "1048576")
    assert p.returncode == 0, p.stderr
    args = ["check", str(dep), "--gpu", "A100-80GB", "--model", str(ROOT / "tests/scenarios/s1/model"), "--fix"]
    p = run(*args, *(["--in-place"] if in_place else []))
    assert "wrote" in p.stderr, p.stderr
    written = dep if in_place else tmp_path / "deploy.fixed.yaml"
    assert sorted(x.name for x in tmp_path.iterdir()) == sorted({"deploy.yaml", written.name})
    c = k8s_container(written.read_text())
    assert value_of(c["args"], "--max-num-batched-tokens") != "1048576"
    assert written.read_text().startswith("# generated by `oomguard export launch --to kubernetes`")


# -- CLI consistency (issue 17) ---------------------------------------------------------------


def test_export_validates_values_like_plan_and_check():
    p = export("docker", "--", "vllm", "serve", "m", "--gpu-memory-utilization", "1.5")
    assert p.returncode == 2 and "--gpu-memory-utilization 1.5" in p.stderr and "(0, 1]" in p.stderr
    p = run("export", "alerts", "--vllm-version", "9.9")
    assert p.returncode == 2 and "9.9" in p.stderr
    p = export("docker", "--vllm-version", "9.9", "--", "vllm", "serve", "m")
    assert p.returncode == 2


def test_a_variable_the_launch_does_not_set_is_exported_as_a_reference(tmp_path, capsys):
    """The reader leaves `--x "$VAR"` out of the flags (vLLM's default is planned); the export
    carries it as the target's reference to VAR instead of dropping it or writing `$VAR` literally."""
    script = tmp_path / "start_api.sh"
    script.write_text('vllm serve m --otlp-traces-endpoint "$OTLP_URL" --max-model-len 4096\n')
    p = export_in_process(capsys, "systemd", str(script))
    assert p.returncode == 0, p.stderr
    assert "--otlp-traces-endpoint ${OTLP_URL}" in p.stdout and "OTLP_URL" in p.stderr
    p = export_in_process(capsys, "kubernetes", str(script))
    c = k8s_container(p.stdout)
    assert value_of(c["args"], "--otlp-traces-endpoint") == "$(OTLP_URL)"
    assert {"name": "OTLP_URL", "valueFrom": {"secretKeyRef": {"name": "vllm-secrets", "key": "OTLP_URL"}}} in c["env"]
    script.write_text('vllm serve m --otlp-traces-endpoint "http://$HOST:$PORT"\n')
    p = export_in_process(capsys, "docker", str(script))
    assert p.returncode == 2 and "--otlp-traces-endpoint" in p.stderr and len(p.stderr.strip().splitlines()) == 1
