"""Host RAM arithmetic of a launch, from plain flags (no launch parser involved)."""

from __future__ import annotations

import pytest

from oomguard.host.requirements import (
    MemoryKind,
    host_ram_needed,
    kv_offload_bytes,
    largest_cpu_offload_gb_that_fits,
    largest_kv_offload_that_fits,
    next_power_of_two,
)
from oomguard.units import GiB

S3_KTC = {
    "kv_connector": "OffloadingConnector",
    "kv_role": "kv_both",
    "kv_connector_extra_config": {"cpu_bytes_to_use": 214748364800, "eviction_policy": "arc"},
}


def comp(need, name):
    c = need.component(name)
    assert c is not None, f"no component {name!r} in {[c.name for c in need.components]}"
    return c


def test_s3_cpu_bytes_to_use_is_one_exact_size_shm_file_from_0_27():
    need = host_ram_needed(
        {"tensor_parallel_size": 4, "kv_transfer_config": S3_KTC, "max_model_len": 750000, "max_num_seqs": 96},
        weights_bytes=None,
    )  # the newest release
    kv = comp(need, "kv offload (CPU tier)")
    assert kv.kind is MemoryKind.SHMEM
    assert kv.low_bytes == kv.expected_bytes == kv.high_bytes == 200 * GiB  # the total asked for: not 4 x 200, not rounded
    assert need.shm_bytes == 200 * GiB and need.shm_checked_by_vllm
    tok = comp(need, "token-id buffers")
    assert tok.expected_bytes == 4 * 96 * 750000 * 4
    assert comp(need, "worker processes").expected_bytes == 4 * 3 * GiB
    assert need.expected_bytes == 200 * GiB + tok.expected_bytes + 12 * GiB + 3 * GiB
    assert need.world_size == 4
    assert host_ram_needed({"tensor_parallel_size": 4, "kv_transfer_config": S3_KTC}, weights_bytes=None, vllm_version="0.27.0").shm_checked_by_vllm is False


def test_s3_pool_on_0_26_matches_the_rounding_measured_in_vllm_53042():
    from oomguard.host.ram_model import kv_tier_layout

    # vllm#53042: a 200 GiB pool, world_size 4: 24 pinned tensors of 2.0832 GiB per rank, each rounded to 4 GiB:
    # 96 GiB per rank, 384 GiB in all. 12 attention layers, K and V apart (0.20-0.26 canonical tensors).
    need = host_ram_needed({"tensor_parallel_size": 4, "kv_transfer_config": S3_KTC}, weights_bytes=None, vllm_version="0.26.0", kv_layout=kv_tier_layout(12))
    kv = comp(need, "kv offload (CPU tier)")
    assert kv.kind is MemoryKind.PINNED and kv.expected_bytes == 384 * GiB
    assert need.shm_bytes == 0 and need.kv_pinned_tensors == 24
    # Without the tensor count: every tensor may double, 1x-2x.
    blind = comp(host_ram_needed({"tensor_parallel_size": 4, "kv_transfer_config": S3_KTC}, weights_bytes=None, vllm_version="0.26.0"), "kv offload (CPU tier)")
    assert (blind.low_bytes, blind.expected_bytes, blind.high_bytes) == (200 * GiB, 400 * GiB, 400 * GiB)


@pytest.mark.parametrize("size, per_worker_gib", [(80, 64), (64, 32)])
def test_kv_offloading_size_tp2_measured_rss_lies_in_the_range(size, per_worker_gib):
    # vllm#48436, TP2 on a pinned-tensor release: --kv-offloading-size 64 -> ~32 GB per worker, 80 -> ~64 GB.
    c = comp(host_ram_needed({"tensor_parallel_size": 2, "kv_offloading_size": size}, weights_bytes=None, vllm_version="0.25.0"), "kv offload (CPU tier)")
    assert c.low_bytes <= 2 * per_worker_gib * GiB <= c.high_bytes


def test_kv_offload_with_data_parallel_engines():
    need = host_ram_needed(
        {"tensor_parallel_size": 2, "data_parallel_size": 2, "kv_offloading_size": 64}, weights_bytes=None
    )
    assert need.world_size == 4
    # one file per DP engine (engine_id differs)
    assert comp(need, "kv offload (CPU tier)").expected_bytes == 128 * GiB and need.shm_bytes == 128 * GiB


def test_kv_offload_sources():
    assert kv_offload_bytes({"kv_offloading_size": 1.5})[0] == int(1.5 * GiB)
    assert kv_offload_bytes({"kv_transfer_config": S3_KTC})[0] == 214748364800
    size, why = kv_offload_bytes({"kv_transfer_config": {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"num_cpu_blocks": 1000}}})
    assert size is None and "num_cpu_blocks" in why
    assert kv_offload_bytes({"kv_transfer_config": {"kv_connector": "NixlConnector"}}) == (None, None)
    # The lmcache backend ignores the size (it uses LMCache's own).
    assert kv_offload_bytes({"kv_offloading_size": 10, "kv_offloading_backend": "lmcache"}) == (None, None)


def test_cpu_offload_is_per_gpu_with_measured_overhead():
    need = host_ram_needed({"tensor_parallel_size": 2, "cpu_offload_gb": 10}, weights_bytes=None)
    c = comp(need, "cpu offload (--cpu-offload-gb)")
    assert (c.low_bytes, c.expected_bytes, c.high_bytes) == (20 * GiB, int(38 * GiB), 40 * GiB)


@pytest.mark.parametrize(
    "version, flag, low, expected",
    [
        ("0.6.2", 4, 8, 8),  # V0: allocated
        (None, 4, 0, 8),  # release unknown: the flag means <= 0.17, V0 or V1
        ("0.6.2", None, 8, 8),  # V0 default 4 GiB per GPU
    ],
)
def test_swap_space_by_version(version, flag, low, expected):
    flags = {"tensor_parallel_size": 2}
    if flag is not None:
        flags["swap_space"] = flag
    c = comp(host_ram_needed(flags, weights_bytes=None, vllm_version=version), "swap space (--swap-space)")
    assert (c.low_bytes, c.expected_bytes, c.high_bytes) == (low * GiB, expected * GiB, 16 * GiB)


def test_swap_space_on_a_v1_default_release_follows_the_planners_engine():
    # 0.8-0.10: V1 unless VLLM_USE_V1=0 or a fallback (model.engine.engine_for, the planner's rule):
    # the V1 engine allocates no swap, so it is not counted, not even in the high estimate
    v1 = host_ram_needed({"tensor_parallel_size": 2, "swap_space": 4}, weights_bytes=None, vllm_version="0.9.2")
    assert v1.component("swap space (--swap-space)") is None and any("V1 engine" in n for n in v1.notes)
    v0 = host_ram_needed({"tensor_parallel_size": 2, "swap_space": 4}, weights_bytes=None, vllm_version="0.9.2", engine="V0")
    assert comp(v0, "swap space (--swap-space)").expected_bytes == 8 * GiB  # the planner fell back (a T4)


def test_swap_space_v0_forced_and_v1_only_releases():
    forced = host_ram_needed({"swap_space": 4}, weights_bytes=None, vllm_version="0.9.2", env={"VLLM_USE_V1": "0"})
    assert comp(forced, "swap space (--swap-space)").expected_bytes == 4 * GiB
    # 0.11-0.17 accept the flag, but the V0 engine (worker/cache_engine.py) is gone: nothing allocated.
    v1 = host_ram_needed({"swap_space": 4}, weights_bytes=None, vllm_version="0.17.0")
    assert v1.component("swap space (--swap-space)") is None and any("V1 engine" in n for n in v1.notes)


def test_swap_space_removed_in_018():
    need = host_ram_needed({"swap_space": 16}, weights_bytes=None, vllm_version="0.18.0")
    assert need.component("swap space (--swap-space)") is None
    assert any("removed" in n for n in need.notes)
    assert host_ram_needed({}, weights_bytes=None).component("swap space (--swap-space)") is None


def test_weights_are_page_cache_not_resident():
    need = host_ram_needed({"tensor_parallel_size": 2}, weights_bytes=60 * GiB)
    w = comp(need, "weights (page cache)")
    assert w.kind is MemoryKind.PAGE_CACHE and w.expected_bytes == 60 * GiB
    assert need.page_cache_bytes == 60 * GiB
    assert need.expected_bytes == 2 * 3 * GiB + 3 * GiB  # workers + API server only


def test_pt_checkpoints_load_a_shard_per_worker():
    need = host_ram_needed({"tensor_parallel_size": 2, "load_format": "pt"}, weights_bytes=40 * GiB, shard_bytes=10 * GiB)
    assert comp(need, "weights (torch.load shard)").expected_bytes == 20 * GiB
    auto = host_ram_needed({}, weights_bytes=40 * GiB, checkpoint_format="pt")
    assert comp(auto, "weights (torch.load shard)").expected_bytes == 5 * GiB  # default 5 GB shards, estimated
    assert host_ram_needed({"load_format": "dummy"}, weights_bytes=40 * GiB).page_cache_bytes == 0


def test_lmcache_local_cpu_per_worker():
    flags = {"tensor_parallel_size": 2, "kv_transfer_config": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}}
    need = host_ram_needed(flags, weights_bytes=None, env={"LMCACHE_MAX_LOCAL_CPU_SIZE": "20"})
    assert comp(need, "LMCache local CPU cache").expected_bytes == 40 * GiB
    off = host_ram_needed(flags, weights_bytes=None, env={"LMCACHE_LOCAL_CPU": "False"})
    assert off.component("LMCache local CPU cache") is None


def test_string_flag_values_and_ranges_are_ordered():
    need = host_ram_needed(
        {"tensor_parallel_size": "2", "cpu_offload_gb": "4", "kv_offloading_size": "24", "max_model_len": "32768"},
        weights_bytes=16 * GiB,
    )
    assert need.world_size == 2
    for c in need.components:
        assert c.low_bytes <= c.expected_bytes <= c.high_bytes, c.name
    assert need.low_bytes <= need.expected_bytes <= need.high_bytes
    d = need.to_dict()
    assert d["resident_expected_bytes"] == need.expected_bytes
    assert {c["kind"] for c in d["components"]} <= {"pinned", "shmem", "anonymous", "page_cache"}


def test_next_power_of_two():
    assert [next_power_of_two(n) for n in (1, 2, 3, 64, 65)] == [1, 2, 4, 64, 128]


def test_largest_kv_offload_that_fits_per_release():
    from oomguard.host.ram_model import kv_tier_layout

    need = host_ram_needed({"tensor_parallel_size": 4, "kv_transfer_config": S3_KTC}, weights_bytes=None)
    # others: 12 GiB workers + 3 GiB API server; 236 GiB budget leaves 221 GiB, one exact-size file: 221 GiB.
    assert largest_kv_offload_that_fits(need, 236 * GiB, 4) == 221 * GiB
    assert largest_kv_offload_that_fits(need, 15 * GiB, 4) is None
    # 0.26 with 24 pinned tensors per worker: 55.25 GiB per worker -> 2 GiB per tensor -> 48 GiB per worker.
    old = host_ram_needed({"tensor_parallel_size": 4, "kv_transfer_config": S3_KTC}, weights_bytes=None, vllm_version="0.26.0", kv_layout=kv_tier_layout(12))
    assert largest_kv_offload_that_fits(old, 236 * GiB, 4) == 4 * 48 * GiB
    blind = host_ram_needed({"tensor_parallel_size": 4, "kv_transfer_config": S3_KTC}, weights_bytes=None, vllm_version="0.26.0")
    assert largest_kv_offload_that_fits(blind, 236 * GiB, 4) == 4 * 27 * GiB  # half the room: each tensor may double


def test_largest_cpu_offload_that_fits():
    need = host_ram_needed({"cpu_offload_gb": 40}, weights_bytes=None)
    # 64 GiB - 6 GiB (worker + API) = 58 GiB / 1.9 = 30.5 -> 30
    assert largest_cpu_offload_gb_that_fits(need, 64 * GiB) == 30
    assert largest_cpu_offload_gb_that_fits(need, 6 * GiB) is None


def test_lmcache_backend_per_release():
    flags = {"tensor_parallel_size": 2, "kv_offloading_backend": "lmcache", "kv_offloading_size": 40}
    # 0.12-0.23: LMCacheConnectorV1 with lmcache.max_local_cpu_size = 40 / 2 GB per worker (config/vllm.py)
    old = host_ram_needed(flags, weights_bytes=None, vllm_version="0.22.0")
    assert comp(old, "LMCache local CPU cache").expected_bytes == 40 * GiB
    # 0.24+: LMCacheMPConnector, the store is the LMCache server's: not vLLM's memory
    new = host_ram_needed(flags, weights_bytes=None, vllm_version="0.24.0")
    assert new.component("LMCache local CPU cache") is None and any("LMCache server" in n for n in new.notes)


@pytest.mark.parametrize("version, counted", [("0.11.0", False), ("0.13.0", False), ("0.14.0", True)])
def test_cpu_tier_in_bytes_from_0_14(version, counted):
    # 0.11-0.13 read num_cpu_blocks only (v1/kv_offload/cpu.py), and 0.12-0.13 set num_cpu_blocks=0 for
    # --kv-offloading-size: the server stops at start-up, so no tier is counted.
    need = host_ram_needed({"kv_offloading_size": 64}, weights_bytes=None, vllm_version=version)
    assert (need.component("kv offload (CPU tier)") is not None) is counted
    if not counted:
        assert any("num_cpu_blocks must be specified" in n for n in need.notes)
