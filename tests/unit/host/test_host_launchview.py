"""LaunchView: checkpoint sizes from disk (sparse files), defaults, visible devices, numactl."""

from __future__ import annotations

from oomguard.host.launchview import checkpoint_on_disk, default_utilization, launch_view
from oomguard.host.root import Root
from oomguard.units import GiB


def sparse(path, size):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.truncate(size)


def test_model_dir_under_a_fake_root_prefers_safetensors(tmp_path):
    model = tmp_path / "data/models/m"
    sparse(model / "model-00001-of-00002.safetensors", 5 * GiB)
    sparse(model / "model-00002-of-00002.safetensors", 3 * GiB)
    sparse(model / "pytorch_model.bin", 8 * GiB)  # ignored next to safetensors, as vLLM does
    (model / "config.json").write_text("{}")
    assert checkpoint_on_disk(Root(tmp_path), "/data/models/m") == (8 * GiB, 5 * GiB, "safetensors")
    assert checkpoint_on_disk(Root(tmp_path), "/data/models/absent") is None


def test_bin_checkpoint_loads_shards_into_anonymous_memory(tmp_path):
    model = tmp_path / "m"
    sparse(model / "pytorch_model-00001-of-00002.bin", 9 * GiB)
    sparse(model / "pytorch_model-00002-of-00002.bin", 4 * GiB)
    v = launch_view(source="s", flags={"tensor_parallel_size": 2}, model="/m", root=Root(tmp_path))
    assert v.ram.page_cache_bytes == 13 * GiB
    assert v.ram.component("weights (torch.load shard)").expected_bytes == 2 * 9 * GiB
    assert "checkpoint size from the files on disk (pt)" in v.notes


def test_hf_cache_lookup_on_the_real_root(tmp_path):
    snap = tmp_path / "hub/models--org--name/snapshots/0123abcd"
    sparse(snap / "model.safetensors", 2 * GiB)
    found = checkpoint_on_disk(Root("/"), "org/name", {"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert found == (2 * GiB, 2 * GiB, "safetensors")


def test_defaults_and_launch_facts():
    assert default_utilization("0.19.1") == 0.90
    assert default_utilization("0.20.0") == default_utilization(None) == 0.92
    v = launch_view(
        source="s",
        flags={"tensor_parallel_size": 2, "pipeline_parallel_size": 2, "gpu_memory_utilization": 0.8},
        env={"CUDA_VISIBLE_DEVICES": "4, 5,6,7"},
        text="exec taskset -c 0-31 vllm serve m\n",
    )
    assert v.world_size == 4 and v.engine_workers == 4
    assert v.visible_devices == ("4", "5", "6", "7")
    assert v.gpu_memory_utilization == 0.8 and v.utilization_explicit
    assert v.numa_bound
    assert not launch_view(source="s", flags={}, text="vllm serve numactl-model\n").numa_bound
