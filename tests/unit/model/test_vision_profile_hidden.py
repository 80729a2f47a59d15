"""The vision tower's profile item keeps the tower's hidden size when the config gives an image size."""

from oomguard.model.architectures.vision import vision_profile


def test_an_image_size_does_not_replace_the_towers_hidden_size():
    # Gemma-3's SigLIP tower: hidden 1152, square 896-pixel images; InternVL-style [height, width] the same way.
    # The image height once overwrote the hidden size (1152 -> 896), lowering the encoder's activation estimate.
    for size in (896, [896, 896]):
        cfg = {"vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                                 "image_size": size, "patch_size": 14}, "mm_tokens_per_image": 256}
        p = vision_profile(cfg)
        assert p == {"hidden": 1152, "intermediate": 4304, "patches": 64 * 64, "tokens": 256, "depth": 27}
