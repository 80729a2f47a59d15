"""The model and GPU the planner checks a fix on, read from the report itself when no --model / --gpu is given
(issue 16 item 4): vLLM's engine config line, a model path matched by its folder name against the bundled catalog,
the card the report's words name, torch's total capacity. Each says where it came from; an unresolved or ambiguous
name is said, never replaced by a guess. Real diagnose runs on written reports, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oomguard.diagnose import planning
from oomguard.diagnose.diagnosis import diagnose_paths
from tests.conftest import run_cli

KV_ERROR = ("ERROR 05-01 10:00:09 [core.py:700] ValueError: To serve at least one request with the model's max seq len "
            "(32768), 18.00 GiB KV cache is needed, which is larger than the available KV cache memory (4.20 GiB). "
            "Based on the available memory, the estimated maximum model length is 7456. Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n")


def _engine(model: str) -> str:
    return (f"INFO 05-01 10:00:00 [core.py:70] Initializing a V1 LLM engine (v0.10.1) with config: model='{model}', "
            f"speculative_config=None, tokenizer='{model}', max_seq_len=32768, dtype=torch.bfloat16, "
            "tensor_parallel_size=1\n")


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "report.log"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_model_path_from_the_engine_config_and_the_card_the_report_names(tmp_path):
    d = diagnose_paths([_write(tmp_path, _engine("/models/Qwen3-8B") + KV_ERROR + "It runs on one RTX 4090.\n")])
    p = d.planner
    assert p["checked"] and p["model"] == "Qwen/Qwen3-8B" and p["model_from"] == "the log or launch"
    assert any("'/models/Qwen3-8B' is not readable here" in n and "same name" in n for n in p["notes"]), p
    assert p["gpu"] == "RTX-4090" and p["gpu_from"].startswith("the report's words ('RTX 4090'")
    first = d.verdicts[0].fix[0]
    assert first.flag == "--max-model-len" and first.checked.startswith("starts"), first


def test_torchs_total_alone_is_planned_as_a_card_of_that_size_and_says_so(tmp_path):
    oom = ("ERROR 05-01 10:00:09 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
           "GPU 0 has a total capacity of 44.39 GiB of which 1.05 GiB is free. Of the allocated memory 40.10 GiB is "
           "allocated by PyTorch\n")
    d = diagnose_paths([_write(tmp_path, _engine("Qwen/Qwen3-8B") + oom)])
    p = d.planner
    assert p["checked"] and p["gpu_from"] == "torch's total capacity" and p["gpu_total_gib"] == pytest.approx(44.39)
    assert any("no card name in the report" in n for n in p["notes"]), p


def test_a_named_card_off_torchs_total_is_planned_at_torchs_total(tmp_path):
    # the words say an A100 80GB; torch says 39.5 GiB (a 40 GB card, or a MIG slice): torch's number wins, said
    oom = ("ERROR 05-01 10:00:09 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
           "GPU 0 has a total capacity of 39.50 GiB of which 1.05 GiB is free.\n")
    d = diagnose_paths([_write(tmp_path, _engine("Qwen/Qwen3-8B") + oom + "on our A100 80GB\n")])
    p = d.planner
    assert p["checked"] and p["gpu_total_gib"] == pytest.approx(39.5), p
    assert any("planned at torch's total" in n for n in p["notes"]), p


def test_an_unknown_model_is_said_on_every_fix_and_in_the_facts(tmp_path):
    d = diagnose_paths([_write(tmp_path, _engine("/models/NoSuchModel-7B") + KV_ERROR + "on an RTX 4090\n")])
    assert d.planner["checked"] is False and "'/models/NoSuchModel-7B' not readable offline" in d.planner["why"]
    assert all(f.checked.startswith("not checked: model '/models/NoSuchModel-7B'") for f in d.verdicts[0].fix
               if f.checked), [f.checked for f in d.verdicts[0].fix]


def test_an_unreadable_model_option_is_said_not_replaced_by_the_logs_model(tmp_path):
    # the user named the model: the planner does not check the fixes on another one the log happens to name
    d = diagnose_paths([_write(tmp_path, _engine("Qwen/Qwen3-8B") + KV_ERROR)], model="my-finetune-7b", gpu="L4")
    assert d.planner["checked"] is False
    assert "'my-finetune-7b' not readable offline" in d.planner["why"] and "(from --model)" in d.planner["why"]
    assert all(f.checked.startswith("not checked: model 'my-finetune-7b'") for f in d.verdicts[0].fix if f.checked)


def test_a_folder_name_two_catalog_models_share_is_ambiguous(monkeypatch):
    from oomguard.inputs import model_config

    monkeypatch.setattr(model_config, "catalog_ids", lambda: ["Qwen/Qwen3-8B", "other/Qwen3-8B"])
    with pytest.raises(planning.NotChecked, match="ambiguous in the catalog .Qwen/Qwen3-8B or other/Qwen3-8B"):
        planning._model_spec("/models/Qwen3-8B")


def test_the_cli_says_what_the_planner_ran_on(tmp_path):
    log = _write(tmp_path, _engine("/models/Qwen3-8B") + KV_ERROR + "It runs on one RTX 4090.\n")
    out = run_cli("diagnose", log, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "fixes checked by the planner on Qwen/Qwen3-8B (from the log or launch) and RTX-4090" in out.stdout
    data = json.loads(run_cli("diagnose", log, "--format", "json", timeout=120).stdout)
    assert data["facts"]["planner"]["model"] == "Qwen/Qwen3-8B"


WEIGHTS_OOM = ("ERROR 05-01 10:00:09 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. "
               "GPU 0 has a total capacity of 44.39 GiB of which 500.00 MiB is free.\n"
               '  File "/usr/lib/python3/site-packages/vllm/model_executor/model_loader/default_loader.py", line 200, '
               "in load_weights\n")


def test_a_tensor_parallel_fix_is_planned_on_the_gpus_it_asks_for_unless_the_report_counts_them(tmp_path):
    log = [_write(tmp_path, _engine("Qwen/Qwen3-32B") + WEIGHTS_OOM)]
    tp = next(f for f in diagnose_paths(log, gpu="L40S").verdicts[0].fix if f.flag == "--tensor-parallel-size")
    assert tp.value == 2 and tp.checked.startswith("starts"), (tp.checked, tp.why)
    assert "planned on 2 GPUs: the report does not say how many" in tp.why
    # one GPU, counted (--num-gpus): TP 2 cannot start there, and the planner says so
    one = next(f for f in diagnose_paths(log, gpu="L40S", num_gpus=1).verdicts[0].fix
               if f.flag == "--tensor-parallel-size")
    assert one.checked.startswith("fails"), one.checked


def test_a_model_the_catalog_lacks_is_planned_on_a_sized_stand_in_and_says_so(tmp_path):
    # Llama-3.3-70B is not in the catalog; its name states 70B of the Llama family: Llama-3.1-70B stands in
    d = diagnose_paths([_write(tmp_path, _engine("meta-llama/Llama-3.3-70B-Instruct") + KV_ERROR
                               + "on one H100 80GB\n")])
    p = d.planner
    assert p["checked"] and p["stand_in"] and p["model"] == "meta-llama/Meta-Llama-3.1-70B", p
    assert p["model_from"] == "the log or launch, as a sized stand-in"
    assert any("sized stand-in meta-llama/Meta-Llama-3.1-70B (70B) for its 70B (from its name)" in n
               for n in p["notes"]), p
    checked = [f.checked for f in d.verdicts[0].fix if f.checked]
    assert checked and all("on the sized stand-in meta-llama/Meta-Llama-3.1-70B: an estimate" in c for c in checked)


def test_a_stand_in_takes_the_quantization_the_name_states():
    awq = planning.sized_standin("Qwen/Qwen2.5-VL-7B-Instruct-AWQ")
    assert awq is not None and awq.model == "Qwen/Qwen2.5-VL-7B-Instruct" and awq.edits == {"quantization": "awq"}
    # a quantization the planner does not model by name (int8, GGUF): no stand-in, the model stays unresolved
    assert planning.sized_standin("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8") is None
    assert planning.sized_standin("TheBloke/Llama-2-70B-GGUF") is None


def test_a_stand_in_is_of_the_same_family_kind_and_size_or_there_is_none():
    assert planning.sized_standin("Qwen/Qwen2.5-72B-Instruct") is None  # no Qwen dense model within 25 % of 72B
    assert planning.sized_standin("gemma-2-27b-it") is None  # the 27B Gemma in the catalog is multimodal (gemma-3)
    moe = planning.sized_standin("Qwen/Qwen3-30B-A3B-GPTQ-Int4")
    assert moe is not None and moe.model == "Qwen/Qwen3-30B-A3B" and moe.edits == {"quantization": "gptq"}
    assert planning.sized_standin("my-finetune-7b") is None  # no family word: its layout is anyone's guess


def test_vllms_weights_line_sizes_a_stand_in_when_the_name_does_not(tmp_path):
    loaded = "INFO 05-01 10:00:05 [gpu_model_runner.py:1800] Model loading took 15.27 GiB and 4.1 seconds\n"
    d = diagnose_paths([_write(tmp_path, _engine("/models/qwen-chat") + loaded + KV_ERROR + "on one RTX 4090\n")])
    p = d.planner
    assert p["checked"] and p["stand_in"] and p["model"] == "Qwen/Qwen3-8B", p
    assert any("from vLLM's 'Model loading took 15.27 GiB'" in n for n in p["notes"]), p


def test_a_stand_in_is_for_one_model_id_not_for_words():
    # a labeller's or a user's words ("X + Y", "Qwen-7B based") are not one model's size: unresolved, said as before
    assert planning.sized_standin("nvidia/Llama-3.1-Minitron-4B-Width-Base + ibm-fms/llama3-8b-accelerator") is None
    assert planning.sized_standin("QAnything 7B LLM (Qwen-7B based)") is None


def test_a_stand_ins_shorter_context_window_is_not_said_to_be_the_models(tmp_path):
    # Llama-3.1-70B (131072 positions) stands in for a Llama 70B launched at 262144: the stand-in's window is not the
    # model's, so the fixes are not checked on it (never "fails: max-len-exceeds-model")
    engine = _engine("someone/Llama-3.3-70B-Long").replace("max_seq_len=32768", "max_seq_len=262144")
    d = diagnose_paths([_write(tmp_path, engine + KV_ERROR + "on one H200\n")],
                       launch_text="vllm serve someone/Llama-3.3-70B-Long --max-model-len 262144\n")
    assert d.planner["checked"] and d.planner["model"] == "meta-llama/Meta-Llama-3.1-70B", d.planner
    checked = [f.checked for f in d.verdicts[0].fix if f.checked]
    assert checked and not any(c.startswith("fails: max-len-exceeds-model") for c in checked), checked
    assert any("shorter context window than this launch's max_model_len" in c for c in checked), checked


def test_a_mistral_7b_stands_in_with_its_published_32k_window():
    # the catalog's Mistral-7B-Instruct-v0.2 was once a 512-position re-save (its SOURCE.md): a stand-in said
    # "fails: max-len-exceeds-model" for every Mistral launch above 512 tokens
    s = planning.sized_standin("someone/Mistral-7B-Instruct-v0.9")
    assert s is not None and s.model == "mistralai/Mistral-7B-Instruct-v0.2"
