"""Production models' attention layers, rebuilt from the course's parts.

:func:`rope_lessons.real.production_checks.check_layer` instantiates transformers' own
attention layer of a family from a tiny random configuration, runs it with the
mask and position tables transformers' model would build, and runs the course's
:func:`attention` on the same projections with the spec, window, placement and
sinks that :mod:`rope_lessons.real.production` reads from the configuration. The
outputs agree to float32 rounding; each changed reading (a layout, a slice, a
dropped scale, sink or mask) does not, so each check can fail. The other tests
check what :mod:`rope_lessons.real.production` reads from each family's configuration.
"""

from __future__ import annotations

import math

import pytest
import torch

from rope_lessons.real.production import (
    compress_rate,
    compressed_positions,
    design_row,
    layer_local,
    layer_placement,
    layer_rope,
    layer_type,
    mla_softmax_scale,
    mrope_sections,
    nope_temperature,
    qk_rms_norm,
    uses_rope,
)
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import Local

transformers = pytest.importorskip("transformers")

from rope_lessons.real.production_checks import (  # noqa: E402  (transformers first)
    CHECKS,
    HEAD_DIM,
    QWEN_SECTIONS,
    check_layer,
    tiny_config,
)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    ("family", "layer_idx"),
    [(family, index) for family, index, _ in CHECKS],
    ids=[f"{family} layer {index}" for family, index, _ in CHECKS],
)
def test_the_production_layer_is_the_courses_rebuild(
    family: str, layer_idx: int, seed: int
) -> None:
    check = check_layer(family, layer_idx, seed)
    assert check.equal, f"{check.layer}: {check.difference:.2e} at scale {check.scale:.2f}"
    assert check.scale > 0.1  # the layer's output is not nearly zero
    assert check.wrong, "a check without a changed reading cannot fail"
    for name, difference in check.wrong.items():  # each changed reading is not the model
        assert difference > 1e-3 + 100 * check.difference, name


def test_an_unknown_check_is_refused() -> None:
    with pytest.raises(ValueError, match="no check for layer 2 of 'smollm3'"):
        check_layer("smollm3", 2)
    with pytest.raises(ValueError, match="no tiny configuration for 'mystery'"):
        tiny_config("mystery")


def test_smollm3_drops_rope_from_every_fourth_layer() -> None:
    config = tiny_config("smollm3")
    assert [uses_rope(config, i) for i in range(4)] == [True, True, True, False]
    assert layer_rope(config, 3) is None
    spec = layer_rope(config, 0)
    assert spec is not None and spec.layout == "half" and spec.dim == HEAD_DIM
    assert layer_local(config, 0) is None  # use_sliding_window is off by default


def test_llama4_is_irope() -> None:
    """Three chunked RoPE layers (interleaved, through view_as_complex), then a full
    NoPE layer whose queries are scaled by the temperature."""
    config = tiny_config("llama4_text")
    assert [layer_type(config, i) for i in range(4)] == ["chunked_attention"] * 3 + [
        "full_attention"
    ]
    assert layer_local(config, 0) == Local(4, "chunk") and layer_local(config, 3) is None
    spec = layer_rope(config, 0)
    assert spec is not None and spec.layout == "interleaved"
    assert layer_rope(config, 3) is None
    scales = nope_temperature(torch.arange(9), floor_scale=3, attn_scale=0.1)
    assert torch.equal(scales[:2], torch.ones(2)) and bool((scales.diff() >= 0).all())
    assert scales[8].item() == pytest.approx(1 + 0.1 * torch.log(torch.tensor(4.0)).item())


def test_bad_layers_and_unknown_families_are_refused() -> None:
    config = tiny_config("smollm3")
    with pytest.raises(ValueError, match="not a layer of this model"):
        uses_rope(config, 4)
    with pytest.raises(TypeError, match="layer_idx must be an int"):
        uses_rope(config, True)
    with pytest.raises(ValueError, match="no layout is recorded for model_type 'mystery'"):
        layer_rope({"model_type": "mystery", "num_hidden_layers": 2}, 0)
    with pytest.raises(TypeError, match="positions must be integers"):
        nope_temperature(torch.ones(3), floor_scale=8192, attn_scale=0.1)


def test_rms_norm_commutes_with_rope() -> None:
    x = torch.randn(2, 3, 7, 8)
    spec = Rope(8, 10000.0, "interleaved")
    before = spec.apply(qk_rms_norm(x, 1e-5))
    after = qk_rms_norm(spec.apply(x), 1e-5)
    torch.testing.assert_close(before, after, rtol=1e-6, atol=1e-6)


def test_gpt_oss_alternates_windows_with_full_layers_under_yarn() -> None:
    config = tiny_config("gpt_oss")
    assert layer_local(config, 0) == Local(4, "window") and layer_local(config, 1) is None
    spec = layer_rope(config, 0)
    assert spec is not None and spec.layout == "half"
    # YaRN, factor 32: the attention factor 0.1 ln 32 + 1 on every rotated query and key
    assert spec.attention_factor == pytest.approx(0.1 * torch.log(torch.tensor(32.0)).item() + 1)


def test_gemma4_full_layers_are_p_rope_with_p_a_quarter() -> None:
    config = tiny_config("gemma4_text")
    sliding, full = layer_rope(config, 0), layer_rope(config, 1)
    assert sliding is not None and full is not None
    assert sliding == Rope(HEAD_DIM, 10_000.0, "half")
    assert full == Rope(2 * HEAD_DIM, 1e6, "half", p=0.25)  # not rotary_dim=4
    assert full != Rope(2 * HEAD_DIM, 1e6, "half", rotary_dim=4)
    assert layer_local(config, 0) == Local(4, "window") and layer_local(config, 1) is None


def test_deepseek_v4_is_vo_rope_on_a_trailing_interleaved_slice() -> None:
    config = tiny_config("deepseek_v4")
    spec = layer_rope(config, 0)
    assert spec == Rope(
        2 * HEAD_DIM, 10_000.0, "interleaved", rotary_dim=HEAD_DIM, rotary_slice="trailing"
    )
    assert layer_placement(config, 0) == "qkvo" and layer_local(config, 0) == Local(4, "window")
    assert (
        layer_placement(tiny_config("smollm3"), 3) == "nope"
        and layer_placement(tiny_config("smollm3"), 0) == "qk"
    )


def test_deepseek_v4_compressed_entries_turn_at_their_blocks_first_position() -> None:
    config = tiny_config("deepseek_v4")
    assert [compress_rate(config, i) for i in (1, 2)] == [2, 4]
    assert compressed_positions(config, 2, 11).tolist() == [0, 4]  # complete blocks only
    assert compressed_positions(config, 1, 11).tolist() == [0, 2, 4, 6, 8]
    with pytest.raises(ValueError, match="keeps no compressed entries"):
        compress_rate(config, 0)
    # the compressed layers' YaRN with the attention factor transformers sets to 1
    compressed = layer_rope(config, 1)
    assert compressed is not None and compressed.attention_factor == 1.0
    assert compressed.rotary_slice == "trailing" and compressed != layer_rope(config, 0)


def test_mla_multiplies_its_softmax_scale_by_mscale_squared() -> None:
    mscale = 0.1 * math.log(4.0) + 1.0  # the tiny configuration's factor 4, mscale_all_dim 1
    assert mla_softmax_scale(tiny_config("deepseek_v3")) == pytest.approx(mscale**2)
    published = {
        "model_type": "deepseek_v3",
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": 1e4,
            "factor": 40.0,
            "mscale_all_dim": 1.0,
        },
    }
    assert round(mla_softmax_scale(published), 3) == 1.874  # DeepSeek-V3's
    assert mla_softmax_scale({"model_type": "deepseek_v3", "rope_theta": 1e4}) == 1.0


def test_qwen3_5_turns_a_quarter_of_each_head_with_interleaved_mrope() -> None:
    config = tiny_config("qwen3_5_text")
    spec = layer_rope(config, 3)
    assert spec == Rope(128, 10_000.0, "half", rotary_dim=32)  # HF partial rotary, not p-RoPE
    assert mrope_sections(config) == (QWEN_SECTIONS, "interleaved")
    assert mrope_sections(tiny_config("smollm3")) is None


def test_the_design_table_says_what_each_family_does_differently() -> None:
    families = sorted({family for family, _, _ in CHECKS})
    rows = {row["model"]: row for row in (design_row(tiny_config(f)) for f in families)}
    assert rows["smollm3"]["NoPE layers"] == "1 of 4: [3]"
    assert rows["llama4_text"]["layout"] == "interleaved"
    assert rows["llama4_text"]["local layers"] == "3 of 4: chunk of 4"
    assert rows["gpt_oss"]["RoPE"].startswith("base 150,000, yarn x32")
    assert rows["gpt_oss"]["sinks"] == rows["deepseek_v4"]["sinks"] != rows["smollm3"]["sinks"]
    assert "p-RoPE, p = 0.25" in rows["gemma4_text"]["RoPE"]
    assert "value = key projection" in rows["gemma4_text"]["placement"]
    assert "trailing 8 of 16 features" in rows["deepseek_v4"]["RoPE"]
    assert rows["deepseek_v4"]["placement"].startswith("qkvo")
    assert rows["qwen3_5_text"]["linear-attention layers"] == "3 of 4"
    assert rows["qwen3_5_text"]["multimodal RoPE"] == "interleaved sections [6, 5, 5]"
    assert rows["deepseek_v4"]["local layers"] == (
        "3 of 3: window of 4; 1 CSA: 1 entry per 2 positions, an indexer's top 2 read;"
        " 1 HCA: 1 entry per 4 positions, all read"
    )
    assert rows["deepseek_v3"]["RoPE"].endswith("decoupled: 8 features turn beside 8 that do not")
    assert "leading 32 of 128 features" in rows["qwen3_5_text"]["RoPE"]
    assert {len(row) for row in rows.values()} == {10}
    with pytest.raises(ValueError, match="layer 0 is linear_attention, a recurrence"):
        layer_placement(tiny_config("qwen3_5_text"), 0)
