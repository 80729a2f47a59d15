"""GPU catalog lookups the way people type names."""

import pytest

from oomguard.errors import UnknownGPUError
from oomguard.inputs.hardware import lookup_gpu
from oomguard.units import GiB


@pytest.mark.parametrize(
    "name,expected",
    [("A100-80GB", "A100-SXM4-80GB"), ("a100 80g", "A100-SXM4-80GB"), ("H100", "H100-SXM-80GB"), ("H100-SXM", "H100-SXM-80GB"),
     ("H200", "H200-141GB"), ("L40S", "L40S"), ("L4", "L4"), ("A10G", "A10G"), ("T4", "T4"), ("V100-16GB", "V100-16GB"),
     ("RTX-4090", "RTX-4090"), ("4090", "RTX-4090"), ("RTX-3090", "RTX-3090"), ("RTX-5090", "RTX-5090"), ("RTX-4080", "RTX-4080"),
     ("RTX-2080-Ti", "RTX-2080-Ti"), ("GTX-1080", "GTX-1080"), ("B200", "B200-180GB"), ("MI300X", "MI300X"), ("nvidia_h100_sxm", "H100-SXM-80GB")],
)
def test_aliases(name, expected):
    assert lookup_gpu(name).name == expected


def test_cuda_reported_totals():
    assert round(lookup_gpu("A100-80GB").total_bytes / GiB, 2) == 79.15
    assert round(lookup_gpu("RTX 4090").total_bytes / GiB, 2) == 23.64


def test_memory_override():
    g = lookup_gpu("A100", 79.25)
    assert round(g.total_bytes / GiB, 2) == 79.25 and g.total_source == "--gpu-memory-gib"


def test_unknown_lists_close_matches():
    with pytest.raises(UnknownGPUError, match="H100"):
        lookup_gpu("H1000")


@pytest.mark.parametrize("name,choices", [("A100", ("A100-SXM4-80GB", "A100-SXM4-40GB")),
                                          ("v100", ("V100-16GB", "V100-32GB"))])
def test_ambiguous_name_is_answered_with_the_choices(name, choices):
    from oomguard.errors import UnknownGPUError

    with pytest.raises(UnknownGPUError) as err:
        lookup_gpu(name)
    assert "ambiguous" in str(err.value) and all(c in str(err.value) for c in choices)


def test_ambiguous_name_with_a_total_picks_the_card_of_that_size():
    assert lookup_gpu("A100", 39.5).name == "A100-SXM4-40GB"
    assert lookup_gpu("A100", 79.25).name == "A100-SXM4-80GB"
