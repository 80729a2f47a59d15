"""Who raised it, and how sure (issue 16): the component whose code raised an error, the interpreter's own
messages, the generic-exception tier, and a server said to work while a client of it failed.

Each test writes a report in the shape public threads paste it and runs the real diagnose with the shipped weights.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.diagnose import scoring
from oomguard.diagnose.diagnosis import diagnose
from oomguard.diagnose.parsers.frames import component, frame


def _diagnose(tmp_path: Path, text: str):  # noqa: ANN202 - a Diagnosis
    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    return diagnose([str(p)])


def _features(v) -> set[str]:  # noqa: ANN001 - a Verdict
    return {c["feature"] for c in v.cues}


@pytest.mark.parametrize("line, expected", [
    ('  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 80, in __init__', "vllm"),
    ('  File "/workspace/vllm/vllm/model_executor/models/qwen3_vl.py", line 1609, in forward', "vllm"),
    # a wrapper's own module that happens to sit in a folder named vllm is the wrapper's code
    ('  File "/huggingfaceserver/huggingfaceserver/vllm/vllm_model.py", line 141, in start_engine', "wrapper"),
    ('  File "/opt/venv/lib/python3.10/site-packages/kserve/model_server.py", line 297, in _serve', "wrapper"),
    ('  File "/opt/venv/lib/python3.10/site-packages/transformers/configuration_utils.py", line 9, in get', "transformers"),
    ('  File "/opt/venv/lib/python3.10/site-packages/openai/_base_client.py", line 1059, in request', "client"),
    ('  File "/usr/lib/python3.10/asyncio/runners.py", line 44, in run', "server"),
    ('  File "/usr/lib/python3.10/json/decoder.py", line 337, in decode', "python"),
    ('  File "/home/me/run.py", line 3, in <module>', "wrapper"),
    ("│ /opt/x/site-packages/vllm_ascend/worker/worker.py:120 in load_model │", "plugin"),
])
def test_a_frames_file_names_the_component_whose_code_it_is(line, expected):
    found = frame(line)
    assert found is not None
    assert component(found[1]) == expected


def test_a_frame_shape_without_a_path_names_no_component():
    found = frame("model_runner.py, line 1024, in load_model")
    assert found == ("load_model", None) and component(found[1]) is None


_WRAPPER_KWARG = """\
2025-05-30 06:29:14.119 1 uvicorn.error ERROR:    Traceback (most recent call last):
  File "/usr/lib/python3.10/asyncio/runners.py", line 44, in run
    return loop.run_until_complete(main)
  File "/srv/modelserver/modelserver/model_server.py", line 297, in _serve
    await asyncio.gather(*self.servers)
  File "/srv/modelserver/modelserver/engines/vllm_model.py", line 141, in start_engine
    OpenAIServingChat(
TypeError: OpenAIServingChat.__init__() got an unexpected keyword argument 'enable_reasoning'
2025-05-30 06:29:14.120 1 modelserver ERROR [__main__.py:<module>():322] Failed to start model server: \
OpenAIServingChat.__init__() got an unexpected keyword argument 'enable_reasoning'
"""


def test_a_keyword_a_wrappers_call_passes_to_vllm_is_two_versions_out_of_step(tmp_path):
    v = _diagnose(tmp_path, _WRAPPER_KWARG).verdicts[0]
    # not the user's command line: the wrapper's code and the installed vLLM disagree on a class's signature
    assert v.cls.value == "missing-dependency"
    assert {"sig:api-mismatch", "raised:wrapper"} <= _features(v)
    assert "sig:unrecognized-args" not in _features(v)  # the re-logged line takes the traceback's attribution
    assert v.component == "wrapper" and v.to_dict()["component"] == "wrapper"


_VLLM_KWARG = """\
Traceback (most recent call last):
  File "/home/me/run.py", line 3, in <module>
    llm = LLM(model="facebook/opt-125m", max_num_seq=8)
  File "/usr/local/lib/python3.12/site-packages/vllm/entrypoints/llm.py", line 243, in __init__
    engine_args = EngineArgs(
TypeError: EngineArgs.__init__() got an unexpected keyword argument 'max_num_seq'
"""


def test_a_keyword_vllm_passes_on_from_the_user_is_a_bad_argument(tmp_path):
    v = _diagnose(tmp_path, _VLLM_KWARG).verdicts[0]
    assert v.cls.value == "bad-argument"
    assert "sig:api-mismatch" not in _features(v)


_INTERPRETER = """\
(EngineCore pid=530)   File "/workspace/vllm/vllm/model_executor/models/qwen3_vl.py", line 1609, in forward
(EngineCore pid=530)     hidden_states = hidden_states + deepstack
(EngineCore pid=530) TypeError: unsupported operand type(s) for +: 'Tensor' and 'Tensor'
"""


def test_the_interpreters_own_message_is_not_a_statement_about_the_configuration(tmp_path):
    v = _diagnose(tmp_path, _INTERPRETER).verdicts[0]
    features = _features(v)
    assert "exc:python" in features
    assert "words:not-supported" not in features  # "unsupported operand" is Python's wording, not a rejected setting
    assert not (v.cls.value == "config-error" and v.confidence > 0.9)
    assert v.tier == "generic" and v.confidence <= scoring.load().generic_cap


def test_explain_json_shows_the_component_and_the_tier(tmp_path, capsys):
    from oomguard.cli.main import main

    p = tmp_path / "report.txt"
    p.write_text(_WRAPPER_KWARG, encoding="utf-8")
    main(["diagnose", str(p), "--format", "json"])
    data = json.loads(capsys.readouterr().out)
    top = data["verdicts"][0]
    assert top["component"] == "wrapper"
    assert any(c["feature"] == "raised:wrapper" for c in top["cues"])


def test_the_generic_cap_is_fitted_and_read_from_the_weights():
    shipped = json.loads(scoring.WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert 0.5 <= shipped["generic_cap"] <= 1.0 and "generic_cap_fitted_on" in shipped["meta"]
    assert scoring.Weights.from_dict({"classes": ["unknown"]}).generic_cap == 1.0  # an older file: no cap


_CLIENT_APP = """\
I have successfully deployed and started the service using vllm, and the API calls work fine. However, when I try \
to add it in Dify, I get the following error message: 'base model was not found'.
"""


def test_a_server_said_to_work_while_a_client_app_fails_is_healthy(tmp_path):
    assert _diagnose(tmp_path, _CLIENT_APP).verdicts == []


def test_a_server_said_to_work_before_it_crashed_is_still_a_failure(tmp_path):
    text = ("The API calls work fine for an hour, then the server crashes with\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 1.12 GiB is free.\nI use it from Dify.\n")
    d = _diagnose(tmp_path, text)
    assert d.verdicts and d.verdicts[0].cls.value.endswith("oom")


# --- the device table (parsers/devices.py) ----------------------------------------------------------------------


def test_every_backend_of_the_device_table_is_a_component_cue_with_its_words():
    from oomguard.diagnose.parsers import cues, devices

    rules = {r.feature: r for r in cues.TABLE}
    for b in devices.BACKENDS:
        if b.names:
            assert f"comp:{b.name}" in rules
        for word in b.memory:
            assert rules["words:gpu-mem"].pattern.search(f"the {word} is full"), word
        for word in b.graphs:
            assert rules["words:capture"].pattern.search(f"while {word}s are built"), word
        for lib in b.collective:
            assert rules["words:collective"].pattern.search(f"{lib} hangs"), lib


@pytest.mark.parametrize("text, feature", [
    ("vllm-gaudi on a Gaudi3: the HPU graphs warm-up fails", "comp:gaudi"),
    ("running tpu-inference on a v6e-8", "comp:tpu"),
    ("the XPU (Arc A770) run with ipex", "comp:xpu"),
])
def test_a_report_naming_a_backend_carries_its_component(tmp_path, text, feature):
    from oomguard.diagnose.diagnosis import prepare

    prepared = prepare([_write(tmp_path, text + "\nit fails with an error\n")])
    assert feature in prepared.collector.cues


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "report.txt"
    p.write_text(text, encoding="utf-8")
    return str(p)


def test_a_collective_that_timed_out_without_an_nccl_line_is_a_collective_failure(tmp_path):
    text = ("[rank1]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error: the all_reduce "
            "in the TP group timed out after 1800000 ms\n")
    v = _diagnose(tmp_path, text).verdicts[0]
    assert "coll:failure" in _features(v)
    assert v.cls.value == "nccl-error"


def test_dev_shm_running_short_is_host_memory(tmp_path):
    text = "RuntimeError: Insufficient space in /dev/shm:\n4095/4096 MiB required, 1405 MiB free\n"
    v = _diagnose(tmp_path, text).verdicts[0]
    assert "mem:host-short" in _features(v)
    assert v.cls.value == "host-oom"
