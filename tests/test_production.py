"""Production models' attention layers, rebuilt from the course's parts.

Each test instantiates transformers' own attention layer of a family from a
tiny random configuration (no weights needed), runs it with the mask and
position embeddings transformers' model would build, and runs the course's
:func:`attention` on the same projections with the spec, window and scales that
:mod:`rope_lessons.production` reads from the configuration. The outputs agree
to float32 rounding; a changed layout, a dropped scale or a missing mask does
not, so each test can fail.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from rope_lessons.attention import Local, attention
from rope_lessons.production import (
    design_row,
    layer_local,
    layer_placement,
    layer_rope,
    layer_type,
    mrope_sections,
    nope_temperature,
    qk_rms_norm,
    uses_rope,
)
from rope_lessons.rope import Rope

transformers = pytest.importorskip("transformers")

B, T, HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 2, 11, 32, 4, 2, 8
TOLERANCE = 1e-5  # rtol and atol: float32 rounding


def _quiet(make: Any, **fields: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make(**fields, attn_implementation="eager")


def _projections(layer: Any, hidden: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The layer's queries, keys and values ``(B, H, T, D)``, unrotated."""
    split = (B, T, -1, HEAD_DIM)
    return tuple(
        proj(hidden).view(split).transpose(1, 2)
        for proj in (layer.q_proj, layer.k_proj, layer.v_proj)
    )


def _output(layer: Any, out: torch.Tensor) -> torch.Tensor:
    projected: torch.Tensor = layer.o_proj(out.transpose(1, 2).reshape(B, T, -1))
    return projected  # (B, T, hidden)


def _hidden_and_mask(config: Any, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor, Any]:
    """Random hidden states ``(B, T, hidden)``, positions ``(B, T)`` and the mask that
    transformers' model builds for this layer's type (causal, sliding or chunked)."""
    from transformers import masking_utils

    hidden = torch.randn(B, T, HIDDEN)
    positions = torch.arange(T).expand(B, T)
    local = layer_local(config, layer_idx) if uses_rope(config, layer_idx) else None
    make_mask = {
        None: masking_utils.create_causal_mask,
        "window": masking_utils.create_sliding_window_causal_mask,
        "chunk": masking_utils.create_chunked_causal_mask,
    }[None if local is None else local.kind]
    mask = make_mask(
        config=config, inputs_embeds=hidden, attention_mask=None,
        past_key_values=None, position_ids=positions,
    )  # fmt: skip
    return hidden, positions, mask


def _smollm3() -> Any:
    return _quiet(
        transformers.SmolLM3Config,
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        num_hidden_layers=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )


def test_smollm3_drops_rope_from_every_fourth_layer() -> None:
    config = _smollm3()
    assert [uses_rope(config, i) for i in range(4)] == [True, True, True, False]
    assert layer_rope(config, 3) is None
    spec = layer_rope(config, 0)
    assert spec is not None and spec.layout == "half" and spec.dim == HEAD_DIM
    assert layer_local(config, 0) is None  # use_sliding_window is off by default


@pytest.mark.parametrize("layer_idx", [0, 3], ids=["rope layer", "nope layer"])
def test_a_smollm3_attention_layer_is_the_courses_attention(layer_idx: int) -> None:
    from transformers.models.smollm3.modeling_smollm3 import (
        SmolLM3Attention,
        SmolLM3RotaryEmbedding,
    )

    config = _smollm3()
    torch.manual_seed(0)
    layer = SmolLM3Attention(config, layer_idx=layer_idx).eval()
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    with torch.no_grad():
        theirs, _ = layer(hidden, SmolLM3RotaryEmbedding(config)(hidden, positions), mask)
        q, k, v = _projections(layer, hidden)
        spec = layer_rope(config, layer_idx)
        if spec is None:
            ours = _output(layer, attention(q, k, v, placement="nope"))
        else:
            ours = _output(layer, attention(q, k, v, rope=spec, placement="qk"))
        # the other answer to "does this layer rotate?" is not the model
        flipped = _output(layer, attention(q, k, v, placement="qk" if spec is None else "nope"))
    torch.testing.assert_close(ours, theirs, rtol=TOLERANCE, atol=TOLERANCE)
    assert not torch.allclose(flipped, theirs, atol=1e-3)


def _llama4(**fields: Any) -> Any:
    return _quiet(
        transformers.Llama4TextConfig,
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=4,
        intermediate_size=64,
        intermediate_size_mlp=64,
        max_position_embeddings=64,
        attention_chunk_size=4,  # chunks of 4 in the RoPE layers
        floor_scale=3,  # the NoPE layers' temperature steps up at positions 2, 5, 8
        **fields,
    )


def test_llama4_is_irope() -> None:
    """Three chunked RoPE layers (interleaved, through view_as_complex), then a full
    NoPE layer whose queries are scaled by the temperature."""
    config = _llama4()
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


@pytest.mark.parametrize("layer_idx", [0, 3], ids=["chunked rope layer", "nope layer"])
def test_a_llama4_attention_layer_is_the_courses_attention(layer_idx: int) -> None:
    from transformers.models.llama4.modeling_llama4 import (
        Llama4TextAttention,
        Llama4TextRotaryEmbedding,
    )

    config = _llama4()
    torch.manual_seed(0)
    layer = Llama4TextAttention(config, layer_idx=layer_idx).eval()
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    rotary = Llama4TextRotaryEmbedding(config)(hidden, positions)
    spec, local = layer_rope(config, layer_idx), layer_local(config, layer_idx)
    with torch.no_grad():
        theirs, _ = layer(hidden, rotary, mask)
        q, k, v = _projections(layer, hidden)
        if spec is not None:  # QK norm; a rotation keeps the norm, so before RoPE is the same
            q, k = qk_rms_norm(q, config.rms_norm_eps), qk_rms_norm(k, config.rms_norm_eps)
            ours = _output(layer, attention(q, k, v, rope=spec, local=local))
            wrong = [  # the half layout, or no chunks
                attention(q, k, v, rope=spec.with_layout("half"), local=local),
                attention(q, k, v, rope=spec),
            ]
        else:
            scales = nope_temperature(
                torch.arange(T), floor_scale=config.floor_scale, attn_scale=config.attn_scale
            )
            scaled = q * scales[:, None]  # (B, H, T, D) times (T, 1)
            ours = _output(layer, attention(scaled, k, v, placement="nope", local=local))
            wrong = [attention(q, k, v, placement="nope")]  # without the temperature
    torch.testing.assert_close(ours, theirs, rtol=TOLERANCE, atol=TOLERANCE)
    for changed in wrong:
        assert not torch.allclose(_output(layer, changed), theirs, atol=1e-3)


def test_bad_layers_and_unknown_families_are_refused() -> None:
    config = _smollm3()
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


def _gpt_oss() -> Any:
    return _quiet(
        transformers.GptOssConfig,
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=2,
        intermediate_size=64,
        num_local_experts=2,
        num_experts_per_tok=1,
        sliding_window=4,
    )


def test_gpt_oss_alternates_windows_with_full_layers_under_yarn() -> None:
    config = _gpt_oss()
    assert layer_local(config, 0) == Local(4, "window") and layer_local(config, 1) is None
    spec = layer_rope(config, 0)
    assert spec is not None and spec.layout == "half"
    # YaRN, factor 32: the attention factor 0.1 ln 32 + 1 on every rotated query and key
    assert spec.attention_factor == pytest.approx(0.1 * torch.log(torch.tensor(32.0)).item() + 1)


@pytest.mark.parametrize("layer_idx", [0, 1], ids=["sliding layer", "full layer"])
def test_a_gpt_oss_attention_layer_is_the_courses_attention_with_sinks(layer_idx: int) -> None:
    from transformers.models.gpt_oss.modeling_gpt_oss import (
        GptOssAttention,
        GptOssRotaryEmbedding,
    )

    config = _gpt_oss()
    torch.manual_seed(0)
    layer = GptOssAttention(config, layer_idx=layer_idx).eval()
    torch.nn.init.normal_(layer.sinks, std=2.0)  # transformers leaves them to the model's init
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    local = layer_local(config, layer_idx)
    spec = layer_rope(config, layer_idx)
    assert spec is not None
    with torch.no_grad():
        theirs, _ = layer(hidden, GptOssRotaryEmbedding(config)(hidden, positions), mask)
        q, k, v = _projections(layer, hidden)
        out, weights = attention(
            q, k, v, rope=spec, local=local, sinks=layer.sinks, return_weights=True
        )
        ours = _output(layer, out)
        wrong = [  # without the sinks, without YaRN's attention factor, without the window
            attention(q, k, v, rope=spec, local=local),
            attention(
                q, k, v, rope=Rope.from_theta(spec.theta, "half"), local=local, sinks=layer.sinks
            ),
        ]
        if local is not None:
            wrong.append(attention(q, k, v, rope=spec, sinks=layer.sinks))
    torch.testing.assert_close(ours, theirs, rtol=TOLERANCE, atol=TOLERANCE)
    assert bool((weights.sum(-1) < 1).all())  # each head's sink keeps a share of every row
    for changed in wrong:
        assert not torch.allclose(_output(layer, changed), theirs, atol=1e-3)


def _gemma4() -> Any:
    return _quiet(
        transformers.Gemma4TextConfig,
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        global_head_dim=2 * HEAD_DIM,  # the full layers' heads are wider
        num_global_key_value_heads=1,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=4,
        attention_k_eq_v=True,
        intermediate_size=64,
        vocab_size=64,
        vocab_size_per_layer_input=16,
        hidden_size_per_layer_input=8,
    )


def test_gemma4_full_layers_are_p_rope_with_p_a_quarter() -> None:
    config = _gemma4()
    sliding, full = layer_rope(config, 0), layer_rope(config, 1)
    assert sliding is not None and full is not None
    assert sliding == Rope(HEAD_DIM, 10_000.0, "half")
    assert full == Rope(2 * HEAD_DIM, 1e6, "half", p=0.25)  # not rotary_dim=4
    assert full != Rope(2 * HEAD_DIM, 1e6, "half", rotary_dim=4)
    assert layer_local(config, 0) == Local(4, "window") and layer_local(config, 1) is None


@pytest.mark.parametrize("layer_idx", [0, 1], ids=["sliding layer", "full layer, K = V"])
def test_a_gemma4_attention_layer_is_the_courses_attention(layer_idx: int) -> None:
    from transformers.models.gemma4.modeling_gemma4 import (
        Gemma4TextAttention,
        Gemma4TextRotaryEmbedding,
    )

    config = _gemma4()
    torch.manual_seed(0)
    layer = Gemma4TextAttention(config, layer_idx=layer_idx).eval()
    for norm in (layer.q_norm, layer.k_norm):  # weights other than ones, so that they count
        torch.nn.init.normal_(norm.weight, 1.0, 0.2)
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    kind, local = layer_type(config, layer_idx), layer_local(config, layer_idx)
    rotary = Gemma4TextRotaryEmbedding(config)(hidden, positions, kind)
    spec = layer_rope(config, layer_idx)
    assert spec is not None
    dim = spec.dim
    with torch.no_grad():
        theirs, _ = layer(hidden, rotary, mask, shared_kv_states={})

        def heads(x: torch.Tensor) -> torch.Tensor:  # (B, T, H*D) -> (B, T, H, D)
            return x.view(B, T, -1, dim)

        keys = heads(layer.k_proj(hidden))
        values = keys if layer.v_proj is None else heads(layer.v_proj(hidden))  # K = V
        q = layer.q_norm(heads(layer.q_proj(hidden))).transpose(1, 2)
        k = layer.k_norm(keys).transpose(1, 2)
        v = layer.v_norm(values).transpose(1, 2)
        # Gemma 4 takes q . k without 1/sqrt(D) (its norms set the scale): undo ours
        q = q * dim**0.5
        ours = layer.o_proj(
            attention(q, k, v, rope=spec, local=local).transpose(1, 2).reshape(B, T, -1)
        )
        if layer_idx == 1:  # HF partial rotary on the same quarter, or the value rotated too
            wrong = [
                attention(q, k, v, rope=Rope(dim, 1e6, "half", rotary_dim=dim // 4)),
                attention(q, k, v, rope=spec, placement="qkv"),
            ]
        else:  # the full layers' base, or no window
            wrong = [
                attention(q, k, v, rope=Rope(dim, 1e6, "half"), local=local),
                attention(q, k, v, rope=spec),
            ]
    torch.testing.assert_close(ours, theirs, rtol=TOLERANCE, atol=TOLERANCE)
    for changed in wrong:
        out = layer.o_proj(changed.transpose(1, 2).reshape(B, T, -1))
        assert not torch.allclose(out, theirs, atol=1e-3)


def _deepseek_v4() -> Any:
    return _quiet(
        transformers.DeepseekV4Config,
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        head_dim=2 * HEAD_DIM,
        qk_rope_head_dim=HEAD_DIM,  # [nope | rope]: the trailing half of each head turns
        q_lora_rank=16,
        o_groups=2,
        o_lora_rank=8,
        num_hidden_layers=2,
        layer_types=["sliding_attention"] * 2,
        sliding_window=4,
        vocab_size=64,
        moe_intermediate_size=16,
        n_routed_experts=2,
        num_experts_per_tok=1,
        index_n_heads=2,
        index_head_dim=8,
    )


def test_deepseek_v4_is_vo_rope_on_a_trailing_interleaved_slice() -> None:
    config = _deepseek_v4()
    spec = layer_rope(config, 0)
    assert spec == Rope(
        2 * HEAD_DIM, 10_000.0, "interleaved", rotary_dim=HEAD_DIM, rotary_slice="trailing"
    )
    assert layer_placement(config, 0) == "qkvo" and layer_local(config, 0) == Local(4, "window")
    assert layer_placement(_smollm3(), 3) == "nope" and layer_placement(_smollm3(), 0) == "qk"


def test_a_deepseek_v4_sliding_layer_is_the_courses_vo_rope_attention() -> None:
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
        DeepseekV4Attention,
        DeepseekV4RotaryEmbedding,
    )

    config = _deepseek_v4()
    torch.manual_seed(0)
    layer = DeepseekV4Attention(config, layer_idx=0).eval()
    torch.nn.init.normal_(layer.sinks, std=2.0)
    hidden, positions, mask = _hidden_and_mask(config, 0)
    rotary = DeepseekV4RotaryEmbedding(config)
    embeddings = {kind: rotary(hidden, positions, kind) for kind in ("main", "compress")}
    spec, local = layer_rope(config, 0), layer_local(config, 0)
    assert spec is not None
    dim = spec.dim

    def project(out: torch.Tensor) -> torch.Tensor:  # (B, H, T, D) -> (B, T, hidden)
        grouped = out.transpose(1, 2).reshape(B, T, config.o_groups, -1)
        projected: torch.Tensor = layer.o_b_proj(layer.o_a_proj(grouped).flatten(2))
        return projected

    with torch.no_grad():
        theirs, _ = layer(hidden, embeddings, positions, mask)
        q = layer.q_b_norm(
            layer.q_b_proj(layer.q_a_norm(layer.q_a_proj(hidden)))
            .view(B, T, -1, dim)
            .transpose(1, 2)
        )
        kv = layer.kv_norm(layer.kv_proj(hidden)).view(B, T, 1, dim).transpose(1, 2)  # K = V
        ours = project(
            attention(q, kv, kv, placement="qkvo", rope=spec, local=local, sinks=layer.sinks)
        )
        leading = Rope(dim, 10_000.0, "interleaved", rotary_dim=dim // 2)
        wrong = [  # the output not turned back; the leading slice; the half layout
            attention(q, kv, kv, placement="qkv", rope=spec, local=local, sinks=layer.sinks),
            attention(q, kv, kv, placement="qkvo", rope=leading, local=local, sinks=layer.sinks),
            attention(
                q, kv, kv, placement="qkvo", rope=spec.with_layout("half"), local=local,
                sinks=layer.sinks,
            ),
        ]  # fmt: skip
    torch.testing.assert_close(ours, theirs, rtol=TOLERANCE, atol=TOLERANCE)
    for changed in wrong:
        assert not torch.allclose(project(changed), theirs, atol=1e-3)


QWEN_SECTIONS = [6, 5, 5]  # 16 pairs: a quarter of 128-dimensional heads turns


def _qwen3_5() -> Any:
    return _quiet(
        transformers.Qwen3_5TextConfig,
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=128,
        num_hidden_layers=4,
        intermediate_size=64,
        vocab_size=64,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10_000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": QWEN_SECTIONS,
        },
    )


def _qwen_positions() -> torch.Tensor:
    """(3, B, T) positions: three text tokens, a 2 x 3 image, two text tokens."""
    text_before = torch.arange(3).expand(3, 3)
    rows, columns = torch.meshgrid(torch.arange(2), torch.arange(3), indexing="ij")
    image = torch.stack(
        (torch.full((6,), 3), 3 + rows.flatten(), 3 + columns.flatten())
    )  # (3, 6): time, height, width
    text_after = (6 + torch.arange(2)).expand(3, 2)
    return torch.cat((text_before, image, text_after), dim=1)[:, None].expand(3, B, T)


def test_qwen3_5_turns_a_quarter_of_each_head_with_interleaved_mrope() -> None:
    config = _qwen3_5()
    spec = layer_rope(config, 3)
    assert spec == Rope(128, 10_000.0, "half", rotary_dim=32)  # HF partial rotary, not p-RoPE
    assert mrope_sections(config) == (QWEN_SECTIONS, "interleaved")
    assert mrope_sections(_smollm3()) is None


def test_a_qwen3_5_attention_layer_is_the_courses_mrope_and_attention() -> None:
    from transformers.masking_utils import create_causal_mask
    from transformers.models.qwen3_5.modeling_qwen3_5 import (
        Qwen3_5Attention,
        Qwen3_5TextRotaryEmbedding,
    )

    from rope_lessons.mrope import apply_rope_nd, multimodal_frequencies

    config = _qwen3_5()
    torch.manual_seed(0)
    layer = Qwen3_5Attention(config, layer_idx=3).eval()
    for norm in (layer.q_norm, layer.k_norm):
        torch.nn.init.normal_(norm.weight, 0.0, 0.2)
    hidden = torch.randn(B, T, HIDDEN)
    positions = _qwen_positions()  # (3, B, T)
    mask = create_causal_mask(
        config=config, inputs_embeds=hidden, attention_mask=None,
        past_key_values=None, position_ids=None,
    )  # fmt: skip
    spec = layer_rope(config, 3)
    sections = mrope_sections(config)
    assert spec is not None and sections is not None
    rotary_dim, dim = spec.rotary_dim, spec.dim

    def turned(x: torch.Tensor, assignment: str) -> torch.Tensor:  # the leading slice turns
        freqs = multimodal_frequencies(spec.theta, sections[0], assignment)  # type: ignore[arg-type]
        axes = [p[:, None, :] for p in positions]  # each (B, 1, T)
        head = apply_rope_nd(x[..., :rotary_dim], axes, freqs, layout="half")
        return torch.cat((head, x[..., rotary_dim:]), dim=-1)

    with torch.no_grad():
        theirs, _ = layer(hidden, Qwen3_5TextRotaryEmbedding(config)(hidden, positions), mask)
        query, gate = torch.chunk(layer.q_proj(hidden).view(B, T, -1, 2 * dim), 2, dim=-1)
        q = layer.q_norm(query).transpose(1, 2)
        k = layer.k_norm(layer.k_proj(hidden).view(B, T, -1, dim)).transpose(1, 2)
        v = layer.v_proj(hidden).view(B, T, -1, dim).transpose(1, 2)

        def output(q_turned: torch.Tensor, k_turned: torch.Tensor) -> torch.Tensor:
            out = attention(q_turned, k_turned, v, placement="nope")  # turned already
            gated = out.transpose(1, 2).reshape(B, T, -1) * torch.sigmoid(gate.reshape(B, T, -1))
            projected: torch.Tensor = layer.o_proj(gated)
            return projected

        ours = output(turned(q, "interleaved"), turned(k, "interleaved"))
        sectioned = output(turned(q, "sections"), turned(k, "sections"))  # Qwen2-VL's blocks
        text_only = output(spec.apply(q), spec.apply(k))  # one axis: the image's rows lost
    torch.testing.assert_close(ours, theirs, rtol=TOLERANCE, atol=TOLERANCE)
    for changed in (sectioned, text_only):
        assert not torch.allclose(changed, theirs, atol=1e-3)


def test_the_design_table_says_what_each_family_does_differently() -> None:
    rows = {
        row["model"]: row
        for row in map(design_row, (_smollm3(), _llama4(), _gpt_oss(), _gemma4(),
                                    _deepseek_v4(), _qwen3_5()))
    }  # fmt: skip
    assert rows["smollm3"]["NoPE layers"] == "1 of 4: [3]"
    assert rows["llama4_text"]["layout"] == "interleaved"
    assert rows["llama4_text"]["local layers"] == "3 of 4: chunk of 4"
    assert rows["gpt_oss"]["RoPE"].startswith("base 150000, yarn x32")
    assert rows["gpt_oss"]["sinks"] == rows["deepseek_v4"]["sinks"] != rows["smollm3"]["sinks"]
    assert "p-RoPE, p = 0.25" in rows["gemma4_text"]["RoPE"]
    assert "value = key projection" in rows["gemma4_text"]["placement"]
    assert "trailing 8 of 16 features" in rows["deepseek_v4"]["RoPE"]
    assert rows["deepseek_v4"]["placement"].startswith("qkvo")
    assert rows["qwen3_5_text"]["linear-attention layers"] == "3 of 4"
    assert rows["qwen3_5_text"]["multimodal"] == "interleaved sections [6, 5, 5]"
    assert "leading 32 of 128 features" in rows["qwen3_5_text"]["RoPE"]
    assert {len(row) for row in rows.values()} == {10}
    with pytest.raises(ValueError, match="layer 0 is linear_attention, a recurrence"):
        layer_placement(_qwen3_5(), 0)
