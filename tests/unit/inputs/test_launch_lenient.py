"""Reading a launch leniently (check's needs): every bad flag is recorded, nothing stops the walk."""

from __future__ import annotations

from functools import partial

from oomguard.inputs import command, reader
from oomguard.inputs.launch import ProblemKind

read_command = partial(reader.read_command, lenient=True)
read_script = partial(command.parse_script, lenient=True)
read_file = partial(reader.read_launch, lenient=True)


def test_unknown_flags_are_recorded_and_parsing_goes_on():
    r = read_command(["vllm serve M --swap-space 4 --use-v2-block-manager --max-model-len 8192 --bogus x"])
    kinds = [(p.kind, p.option, p.value_word.text if p.value_word else None) for p in r.problems]
    assert kinds == [
        (ProblemKind.UNKNOWN, "--swap-space", "4"),
        (ProblemKind.UNKNOWN, "--use-v2-block-manager", None),  # a switch: takes no value
        (ProblemKind.UNKNOWN, "--bogus", "x"),
    ]
    assert r.flags == {"max_model_len": 8192}


def test_invalid_values_and_missing_values():
    r = read_command(["vllm serve M --max-model-len lots --gpu-memory-utilization"])
    assert [(p.kind, p.dest) for p in r.problems] == [(ProblemKind.INVALID_VALUE, "max_model_len"), (ProblemKind.MISSING_VALUE, "gpu_memory_utilization")]


def test_redirections_and_pipes_are_not_arguments():
    r = read_script("vllm serve M --max-model-len 8192 > vllm.log 2>&1 &\n", path=None, version=None)
    assert r.problems == [] and r.flags == {"max_model_len": 8192}


def test_abbreviations_and_underscores():
    r = read_command(["vllm serve M --kv-cache-memory 10G --max_num_seqs 8 --tensor_parallel 2"])
    occ = {o.dest: o for o in r.occurrences}
    assert occ["kv_cache_memory_bytes"].via_prefix and occ["kv_cache_memory_bytes"].canonical == "--kv-cache-memory-bytes"
    assert not occ["max_num_seqs"].via_prefix  # underscores are vLLM's own spelling rule
    assert occ["tensor_parallel_size"].via_prefix
    assert r.flags["kv_cache_memory_bytes"] == 10 * 2**30


def test_dotted_json_subkey():
    r = read_command(["vllm serve M --compilation-config.cudagraph_mode=PIECEWISE"])
    assert r.flags["compilation_config"] == {"cudagraph_mode": "PIECEWISE"}


def test_unset_variables_are_left_to_the_default():
    r = read_script("vllm serve M --max-model-len $MAX_LEN --max-num-seqs ${SEQS:-16}\n", path="x.sh", version=None)
    assert r.flags == {"max_num_seqs": 16}
    assert [(u.option, u.variables) for u in r.unresolved] == [("--max-model-len", ("MAX_LEN",))]


def test_ignore_directives(tmp_path):
    p = tmp_path / "s.sh"
    p.write_text("# oomguard: ignore OG902, OG901\nvllm serve M --enforce-eager  # oomguard: ignore OG604\n")
    r = read_file(p)
    assert r.ignore_file == {"OG902", "OG901"} and r.ignore_lines == {2: {"OG604"}}


def test_yaml_keys_and_config_in_script(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("max_model_len: 8192\nswap_space: 4\n")
    s = tmp_path / "run.sh"
    s.write_text("vllm serve M --config c.yaml --max-num-seqs 8\n")
    r = read_file(s)
    assert r.flags == {"max_model_len": 8192, "max_num_seqs": 8}
    assert [(p.kind, p.yaml_key, p.file) for p in r.problems] == [(ProblemKind.YAML_KEY, "swap_space", str(cfg))]
