"""Facts a fix rests on must be the release's: a host OOM on a V1-only release is not fixed with V0's swap
space, a container's OOMKilled is an OOM kill the summary names, and "fewer sequences" starts from the
release's default for the GPU the report shows (model.engine.default_batch_limits), not a constant."""

from __future__ import annotations


from oomguard.diagnose.diagnosis import diagnose
from tests.conftest import top_verdict

_top = top_verdict


def test_a_docker_oomkilled_on_a_v1_only_release_names_the_kill_and_not_swap_space(tmp_path):
    v = _top(tmp_path, "vllm 0.11.0 in docker on 2x RTX 4090, tp=2. After an hour under load the container exits.\n"
                       "docker inspect shows OOMKilled: true, exit code 137.\n")
    assert v.cls.value == "host-oom"
    assert "OOM kill" in v.summary and "no kernel OOM-killer line" not in v.summary
    assert "--swap-space" not in [f.flag for f in v.fix]  # V1 allocates no CPU swap blocks


def test_a_host_oom_on_a_v0_release_still_offers_less_swap_space(tmp_path):
    v = _top(tmp_path, "vllm 0.6.3: the server is killed, dmesg says\n"
                       "Out of memory: Killed process 4242 (python3) total-vm:98765432kB, anon-rss:65432100kB\n")
    assert v.cls.value == "host-oom"
    assert ("--swap-space", 0) in [(f.flag, f.value) for f in v.fix]


def test_fewer_sequences_start_from_the_small_card_default(tmp_path):
    # a 24 GiB card's default is 256 sequences on every V1 release: halve it, never "256" again
    v = _top(tmp_path,
             "(EngineCore_DP0 pid=311) ERROR 10-02 11:22:41 [core.py:708]   File \"/usr/lib/python3/vllm/v1/worker/"
             "gpu_worker.py\", line 263, in determine_available_memory\n"
             "(EngineCore_DP0 pid=311) ERROR 10-02 11:22:41 [core.py:708]     self.model_runner.profile_run()\n"
             "(EngineCore_DP0 pid=311) ERROR 10-02 11:22:41 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
             "Tried to allocate 4.64 GiB. GPU 0 has a total capacity of 23.55 GiB of which 3.12 GiB is free.\n")
    assert v.cls.value == "profile-oom"
    seqs = [f.value for f in v.fix if f.flag == "--max-num-seqs"]
    assert seqs == [128]


def test_exit_code_137_is_a_whole_number_not_part_of_a_token_count():
    from oomguard.diagnose.parsers import cues

    rule = next(r for r in cues.TABLE if r.feature == "host:oomkilled")
    assert rule.pattern.search("the pod exited, Exit code 137") or rule.pattern.search("container exited with code 137")
    assert not rule.pattern.search("INFO decode 137041102 tokens in 12.3 s")
    assert not rule.pattern.search("errcode 1370")


def test_a_failure_word_said_not_to_have_happened_is_not_a_failure_cue(tmp_path):
    from oomguard.diagnose.parsers import cues

    rule = next(r for r in cues.TABLE if r.feature == "fail:words")

    def counts(text: str) -> bool:
        return any(not cues.negated(text, m) for m in rule.pattern.finditer(text))

    for clean in ("no errors at all", "returned HTTP 200 without any error", "无报错、无截断",
                  "Failed requests:                         0", "errors=0"):
        assert not counts(clean), clean
    for failing in ("it fails with an error when I start it", "it failed after 0.5 s", "Error 0x1f",
                    "vLLM 报错 了", "the server crashed with error 0"):
        assert counts(failing), failing
    # a benchmark's summary after a clean run: no failure found (it was a config-error false alarm)
    p = tmp_path / "bench.txt"
    p.write_text("============ Serving Benchmark Result ============\nSuccessful requests:   200\n"
                 "Failed requests:                         0\nMaximum request concurrency:             50\n",
                 encoding="utf-8")
    assert not diagnose([str(p)]).verdicts
