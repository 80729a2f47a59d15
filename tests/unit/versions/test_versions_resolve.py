"""Resolving command-line option words the way each release's vLLM parser does."""

from __future__ import annotations

import pytest

from oomguard.errors import InputError
from oomguard.versions import AmbiguousFlagError, FlagType, UnknownFlagError, get_release


@pytest.fixture(scope="module")
def v33():
    return get_release("0.33.0")


def test_exact_long_and_alias(v33):
    assert v33.resolve_option("--gpu-memory-utilization").flag.dest == "gpu_memory_utilization"
    res = v33.resolve_option("--device-memory-utilization")
    assert res.flag.dest == "gpu_memory_utilization" and not res.negated
    assert v33.resolve_option("-tp").flag.dest == "tensor_parallel_size"
    assert v33.resolve_option("-q").flag.dest == "quantization"


def test_inline_value_is_split_off(v33):
    res = v33.resolve_option("--max-model-len=32768")
    assert res.flag.dest == "max_model_len" and res.value == "32768"
    assert v33.resolve_option("-tp=4").value == "4"


def test_underscores_accepted_as_dashes(v33):
    assert v33.resolve_option("--max_model_len").flag.dest == "max_model_len"
    assert v33.resolve_option("--kv_cache_memory_bytes=10G").value == "10G"


def test_dotted_json_keys_keep_their_underscores(v33):
    res = v33.resolve_option("--compilation_config.cudagraph_capture_sizes")
    assert res.flag.dest == "compilation_config"
    assert res.subkey == "cudagraph_capture_sizes"
    assert v33.resolve_option("--compilation-config.pass_config.fuse+").subkey == "pass_config.fuse"


def test_old_parser_rewrites_every_underscore():
    v066 = get_release("0.6.6.post1")
    assert v066.parser.underscores == "all" and not v066.parser.dotted_json
    assert v066.resolve_option("--max_num_seqs").flag.dest == "max_num_seqs"


def test_abbreviation_resolves_unique_prefix(v33):
    res = v33.resolve_option("--kv-cache-memory")
    assert res.flag.dest == "kv_cache_memory_bytes" and res.option == "--kv-cache-memory-bytes"
    assert v33.resolve_option("--kv-cache-memory=10737418240").value == "10737418240"
    assert get_release("0.10.2").resolve_option("--kv-cache-memory").flag.dest == "kv_cache_memory_bytes"


def test_ambiguous_prefix_lists_candidates(v33):
    with pytest.raises(AmbiguousFlagError) as err:
        v33.resolve_option("--max-num")
    assert "--max-num-seqs" in err.value.candidates
    assert "--max-num-batched-tokens" in err.value.candidates
    assert isinstance(err.value, InputError)


def test_boolean_negation(v33):
    res = v33.resolve_option("--no-enable-prefix-caching")
    assert res.flag.dest == "enable_prefix_caching" and res.negated
    assert not v33.resolve_option("--enable-prefix-caching").negated
    assert v33.resolve_option("--no-enforce-eager").negated


def test_enable_disable_pairs_only_where_vllm_has_them(v33):
    # 0.33's EnableDisableAction adds --disable-X for every --enable-X boolean
    res = v33.resolve_option("--disable-prefix-caching")
    assert res.flag.dest == "enable_prefix_caching" and res.negated
    res = v33.resolve_option("--enable-hybrid-kv-cache-manager")
    assert res.flag.dest == "disable_hybrid_kv_cache_manager" and res.negated
    with pytest.raises(UnknownFlagError):
        get_release("0.32.0").resolve_option("--disable-prefix-caching")


def test_short_O_forms():
    res = get_release("0.33.0").resolve_option("-O3")
    assert res.flag.dest == "optimization_level" and res.value == "3"
    res = get_release("0.10.2").resolve_option("-O3")
    assert res.flag.dest == "compilation_config" and res.value == "3"


def test_deprecated_option_is_reported():
    res = get_release("0.11.0").resolve_option("--disable-log-requests")
    assert res.deprecated
    assert not get_release("0.11.0").resolve_option("--enable-log-requests").deprecated
    assert get_release("0.33.0").resolve_option("--mamba-cache-mode").deprecated


def test_unknown_flag_carries_suggestion_and_other_versions(v33):
    with pytest.raises(UnknownFlagError) as err:
        v33.resolve_option("--swap-space")
    e = err.value
    assert e.other_versions[0] == "0.6.0" and e.other_versions[-1] == "0.17.1"
    assert "0.18.0" in str(e)
    assert isinstance(e, InputError)


def test_unknown_flag_typo_gets_close_match(v33):
    with pytest.raises(UnknownFlagError) as err:
        v33.resolve_option("--gpu-memroy-utilization")
    assert err.value.suggestion == "--gpu-memory-utilization"
    assert err.value.other_versions == ()


def test_unknown_flag_added_later():
    with pytest.raises(UnknownFlagError) as err:
        get_release("0.15.0").resolve_option("--scheduler-reserve-full-isl")
    assert "added in 0.19.0" in str(err.value)
    assert err.value.other_versions[0] == "0.19.0"


def test_renamed_flag_suggests_replacement(v33):
    with pytest.raises(UnknownFlagError) as err:
        v33.resolve_option("--cuda-graph-sizes")
    assert err.value.suggestion == "--cudagraph-capture-sizes"
    assert "0.13.0" in str(err.value)


def test_inverted_flag_does_not_suggest_its_opposite():
    with pytest.raises(UnknownFlagError) as err:
        get_release("0.20.0").resolve_option("--disable-log-requests")
    assert err.value.suggestion is None
    assert "--enable-log-requests" in str(err.value)


def test_error_carries_file_and_line(v33):
    with pytest.raises(UnknownFlagError) as err:
        v33.resolve_option("--swap-space", file="launch.sh", line=7)
    assert str(err.value).startswith("launch.sh:7: unknown vLLM flag --swap-space")


def test_not_an_option(v33):
    with pytest.raises(InputError):
        v33.resolve_option("swap-space")


def test_frontend_flags_are_known(v33):
    port = v33.resolve_option("--port").flag
    assert port.group.value == "frontend" and port.default == 8000 and port.type is FlagType.INT
    assert v33.resolve_option("--api-key").flag.group.value == "frontend"


def test_history(v33):
    h = v33.history("--swap-space")
    assert (h.first, h.last, h.removed_in) == ("0.6.0", "0.17.1", "0.18.0")
    h = v33.history("--kv_cache_memory_bytes")
    assert (h.first, h.added_in, h.removed_in) == ("0.10.2", "0.10.2", None)
    h = v33.history("--device-memory-utilization")
    assert h.present_in == ("0.31.0", "0.32.0", "0.33.0")


def test_env_default():
    assert get_release("0.33.0").env_default("VLLM_ALLOW_LONG_MAX_MODEL_LEN") is False
    assert get_release("0.8.5.post1").env_default("VLLM_USE_V1") is True
    assert get_release("0.7.3").env_default("VLLM_USE_V1") is False
    with pytest.raises(KeyError):
        get_release("0.33.0").env_default("VLLM_USE_V1")
