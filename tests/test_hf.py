"""From a Hugging Face configuration to a Rope: Rope.from_hf against transformers'
ROPE_INIT_FUNCTIONS for every rope_type, partial factors and per-layer-type configs, the
older rope_scaling form, plain dicts, refusals by name, and Rope.cos_sin against a
transformers rotary embedding."""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
import torch
from helpers import HF_BASES, HF_RTOL

from rope_lessons.rope.hf_config import HF_ROPE_TYPES, hf_rope_parameters, hf_rotary_dim
from rope_lessons.rope.spec import Rope

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

HEAD_DIM = 64
MAX_POSITIONS = 16384

# one case per rope_type (and two for YaRN: with and without DeepSeek's mscale pair)
CASES: dict[str, dict[str, Any]] = {
    "default": {},
    "linear": {"factor": 4.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 4096},
    "yarn, mscale": {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 4096,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
        "beta_fast": 32,
        "beta_slow": 1,
    },
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "llama3, step": {  # Llama 4 Scout's published factors: no band, a step at L
        "factor": 16.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
    },
    "longrope": {
        "long_factor": [1.0 + 0.25 * k for k in range(HEAD_DIM // 2)],
        "short_factor": [1.0 + 0.01 * k for k in range(HEAD_DIM // 2)],
        "original_max_position_embeddings": 4096,
    },
    "proportional": {},
}


# the types that read the length run: each side of the length where they change, and far
SEQ_LENS: dict[str, tuple[int, ...]] = {
    "dynamic": (MAX_POSITIONS, MAX_POSITIONS + 1, 2 * MAX_POSITIONS),
    "longrope": (4096, 4097, 2 * MAX_POSITIONS),
}


def llama_config(parameters: dict[str, Any], head_dim: int = HEAD_DIM) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return transformers.LlamaConfig(
            hidden_size=8 * head_dim,
            num_attention_heads=8,
            head_dim=head_dim,
            max_position_embeddings=MAX_POSITIONS,
            rope_parameters=parameters,
        )


def transformers_table(config: Any, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    """transformers' inverse frequencies (float64) and attention factor for ``config``."""
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":  # GPT-NeoX's reads partial_rotary_factor (Llama's does not)
        from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

        inv_freq, factor = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    return inv_freq.double(), float(factor)


def test_every_type_of_transformers_is_covered() -> None:
    assert set(ROPE_INIT_FUNCTIONS) | {"default"} == set(HF_ROPE_TYPES)


@pytest.mark.parametrize("base", HF_BASES)
@pytest.mark.parametrize("partial", [1.0, 0.5, 0.25])
@pytest.mark.parametrize("case", list(CASES))
def test_from_hf_reproduces_rope_init_functions(case: str, partial: float, base: float) -> None:
    parameters = {"rope_type": case.split(",")[0], **CASES[case], "rope_theta": base}
    if partial != 1.0:
        parameters["partial_rotary_factor"] = partial
        if case == "longrope":  # one factor per rotating pair
            pairs = int(HEAD_DIM * partial) // 2
            parameters["long_factor"] = parameters["long_factor"][:pairs]
            parameters["short_factor"] = parameters["short_factor"][:pairs]
    config = llama_config(parameters)
    for seq_len in SEQ_LENS.get(case, (None,)):
        theirs, their_factor = transformers_table(config, seq_len)
        spec = Rope.from_hf(config, seq_len=seq_len)
        torch.testing.assert_close(spec.theta, theirs, rtol=HF_RTOL, atol=0.0)
        assert spec.attention_factor == pytest.approx(their_factor, rel=1e-12)
        assert spec.layout == "half"
        assert spec == Rope.from_hf(config.to_dict(), seq_len=seq_len)  # a plain dict too
    rotary = HEAD_DIM if case == "proportional" else int(HEAD_DIM * partial)
    assert hf_rotary_dim(config) == spec.rotary_dim == rotary and spec.dim == HEAD_DIM
    assert spec.partial == (rotary < HEAD_DIM)


def test_proportional_is_p_rope_and_partial_rotary_is_not() -> None:
    """Gemma 4's "proportional" keeps the fastest quarter of the full-head ladder and stops
    the rest (p-RoPE); HF partial rotary recomputes a ladder for the leading quarter."""
    full = Rope(HEAD_DIM, 1e6, "half")
    proportional = Rope.from_hf(
        llama_config(
            {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25}
        )
    )
    assert proportional.theta[:8].equal(full.theta[:8]) and bool(
        (proportional.theta[8:] == 0).all()
    )
    assert proportional == Rope(HEAD_DIM, 1e6, "half", p=0.25)
    partial = Rope.from_hf(
        llama_config({"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25})
    )
    assert partial == Rope(HEAD_DIM, 1e6, "half", rotary_dim=HEAD_DIM // 4)
    assert partial.theta.equal(Rope(HEAD_DIM // 4, 1e6).theta)  # the ladder over r = 16
    assert not proportional.partial and partial.partial


def test_the_older_rope_scaling_form_and_top_level_fields() -> None:
    scaling: dict[str, Any] = {
        "type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    old = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": scaling,
    }
    new = llama_config({"rope_theta": 500000.0, **scaling, "rope_type": "llama3"}, 128)
    new.rope_parameters.pop("type", None)
    assert Rope.from_hf(old) == Rope.from_hf(new)
    assert hf_rope_parameters(old)["rope_type"] == "llama3"
    neox = {"hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0}
    assert Rope.from_hf({**neox, "partial_rotary_factor": 0.25}) == Rope(
        64, 10000.0, "half", rotary_dim=16
    )
    assert Rope.from_hf(neox, layout="interleaved") == Rope(64, 10000.0)


def test_per_layer_type_parameters_are_read_for_the_layer_type_asked() -> None:
    """Gemma 4: sliding layers base 1e4 on their head dimension, full layers p-RoPE at 1e6
    on a larger global head dimension."""
    config = transformers.Gemma4TextConfig(
        hidden_size=128,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        global_head_dim=64,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
    )
    for layer_type in ("sliding_attention", "full_attention"):
        theirs, their_factor = transformers_table_per_layer(config, layer_type)
        spec = Rope.from_hf(config, layer_type)
        torch.testing.assert_close(spec.theta, theirs, rtol=HF_RTOL, atol=0.0)
        assert spec.attention_factor == their_factor
    assert Rope.from_hf(config, "sliding_attention") == Rope(32, 10000.0, "half")
    assert Rope.from_hf(config, "full_attention") == Rope(64, 1e6, "half", p=0.25)
    as_json = config.to_dict()  # config.json keeps the overrides under a layer's index
    for layer_type in ("sliding_attention", "full_attention"):
        assert Rope.from_hf(as_json, layer_type) == Rope.from_hf(config, layer_type)
    with pytest.raises(ValueError, match="per layer type"):
        Rope.from_hf(config)
    with pytest.raises(ValueError, match="not one of this configuration's"):
        Rope.from_hf(config, "chunked_attention")
    with pytest.raises(ValueError, match="one set of RoPE parameters"):
        Rope.from_hf(llama_config({"rope_type": "default", "rope_theta": 1e4}), "full_attention")


def transformers_table_per_layer(config: Any, layer_type: str) -> tuple[torch.Tensor, float]:
    """What Gemma 4's rotary embedding builds for one layer type."""
    from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding

    embedding = Gemma4TextRotaryEmbedding(config)
    inv_freq = getattr(embedding, f"{layer_type}_inv_freq")
    return inv_freq.double(), float(getattr(embedding, f"{layer_type}_attention_scaling"))


def test_unknown_types_and_fields_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'ntk_by_parts' is not one of"):
        Rope.from_hf(
            {"head_dim": 64, "rope_parameters": {"rope_type": "ntk_by_parts", "rope_theta": 1e4}}
        )
    qwen = {
        "head_dim": 64,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1e7,
            "mrope_section": [11, 11, 10],
        },
    }
    with pytest.raises(ValueError, match=r"does not read \['mrope_section'\]"):
        Rope.from_hf(qwen)
    with pytest.raises(ValueError, match="seq_len is read only by"):
        Rope.from_hf({"head_dim": 64, "rope_theta": 1e4}, seq_len=100)
    with pytest.raises(ValueError, match="no rope_theta"):
        Rope.from_hf({"head_dim": 64})
    with pytest.raises(ValueError, match="neither head_dim nor"):
        Rope.from_hf({"rope_theta": 1e4})
    with pytest.raises(ValueError, match="no factor, and no max_position_embeddings"):
        Rope.from_hf(
            {
                "head_dim": 64,
                "rope_parameters": {
                    "rope_type": "yarn",
                    "rope_theta": 1e4,
                    "original_max_position_embeddings": 4096,
                },
            }
        )
    with pytest.raises(ValueError, match="short_factor must hold 32 values"):
        Rope.from_hf(
            {
                "head_dim": 64,
                "max_position_embeddings": 8192,
                "rope_parameters": {
                    "rope_type": "longrope",
                    "rope_theta": 1e4,
                    "long_factor": [1.0] * 32,
                    "short_factor": [1.0] * 31,
                    "original_max_position_embeddings": 4096,
                },
            },
            seq_len=4096,
        )


@pytest.mark.parametrize("case", ["default", "yarn", "llama3"])
def test_cos_sin_are_the_tables_of_a_transformers_rotary_embedding(case: str) -> None:
    """Drop-in: the same (B, T, d) tables, the attention factor multiplied in, to the
    float32 rounding of transformers' angles (which grows with the position)."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = llama_config({"rope_type": case.split(",")[0], **CASES[case], "rope_theta": 5e5})
    positions = torch.tensor([[0, 1, 2, 700], [5, 6, 7, 2047]])  # (B, T), left-padded style
    x = torch.zeros(2, 4, HEAD_DIM)
    their_cos, their_sin = LlamaRotaryEmbedding(config)(x, positions)
    cos, sin = Rope.from_hf(config).cos_sin(positions)
    assert cos.shape == their_cos.shape == (2, 4, HEAD_DIM) and cos.dtype == torch.float32
    # float32 angles: spacing m * theta_0 * 2**-24 at most, about 1.2e-4 at position 2047
    torch.testing.assert_close(cos, their_cos, rtol=0.0, atol=2e-4)
    torch.testing.assert_close(sin, their_sin, rtol=0.0, atol=2e-4)


def test_cos_sin_rotate_like_apply_in_both_layouts() -> None:
    """q * cos + rotate(q) * sin with the spec's own tables is apply(), the factor included,
    as transformers' q_embed; apply(scale=False) is the rotation alone."""
    spec = Rope.from_theta([1.0, 0.1, 0.01, 0.001], "half", attention_factor=1.3)
    q = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    positions = torch.arange(5)
    for layout in ("half", "interleaved"):
        turned = spec.with_layout(layout)
        cos, sin = turned.cos_sin(positions, dtype=torch.float64)
        if layout == "half":
            other = torch.cat((-q[..., 4:], q[..., :4]), -1)  # rotate_half
        else:
            other = torch.stack((-q[..., 1::2], q[..., ::2]), -1).flatten(-2)
        torch.testing.assert_close(q * cos + other * sin, turned.apply(q, positions))
        torch.testing.assert_close(q * cos + other * sin, 1.3 * turned.apply(q, scale=False))
    with pytest.raises(TypeError, match="integer tensor"):
        spec.cos_sin(torch.ones(3))
    assert math.isclose(float(spec.cos_sin(torch.tensor([0]))[0][0, 0]), 1.3, rel_tol=1e-6)


@pytest.mark.parametrize("p", [1.0, 0.25, 0.3, 0.75])
@pytest.mark.parametrize("base", HF_BASES)
def test_to_hf_inverts_from_hf_where_the_map_is_one_to_one(p: float, base: float) -> None:
    spec = Rope(64, base, "half", p=p)
    parameters = spec.to_hf()
    assert parameters["rope_type"] == ("default" if p == 1.0 else "proportional")
    assert Rope.from_hf({"head_dim": 64, "rope_parameters": parameters}) == spec
    config = llama_config(dict(parameters))
    theirs, _ = transformers_table(config)
    torch.testing.assert_close(spec.theta, theirs, rtol=HF_RTOL, atol=0.0)


def test_to_hf_refuses_specs_that_no_single_configuration_names() -> None:
    with pytest.raises(ValueError, match="not RoPE's ladder for any base"):
        Rope.from_theta([1.0, 0.3, 0.2]).to_hf()
    assert Rope.from_theta([1.0, 0.5]).to_hf() == {"rope_type": "default", "rope_theta": 4.0}
    with pytest.raises(ValueError, match=r"attention factor 1\.2"):
        Rope(8, attention_factor=1.2).to_hf()


def test_the_float32_angles_of_transformers_differ_as_the_docstring_says() -> None:
    """Rope.cos_sin's docstring: about 4e-4 below position 5000 (and well above a port
    test's 1e-5), from transformers' float32 angles."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    for base in HF_BASES:
        config = llama_config({"rope_type": "default", "rope_theta": base}, head_dim=128)
        positions = torch.arange(3000, 5000)[None]
        their_cos, _ = LlamaRotaryEmbedding(config)(torch.zeros(1, 1, 128), positions)
        cos, _ = Rope.from_hf(config).cos_sin(positions, dtype=torch.float64)
        gap = float((their_cos.double() - cos).abs().max())
        assert 1e-5 < gap < 8e-4, gap  # 3.9e-4 measured; other kernels round differently


def test_partial_rotary_applies_as_gpt_neox_does() -> None:
    """GPT-NeoX's own apply_rotary_pos_emb (leading slice, rotate_half within it) with
    its own tables, against the spec from the same configuration."""
    from transformers.models.gpt_neox.modeling_gpt_neox import (
        GPTNeoXRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.GPTNeoXConfig(
            hidden_size=256,
            num_attention_heads=4,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "partial_rotary_factor": 0.25},
        )  # fmt: skip
    positions = torch.tensor([[0, 1, 2, 3, 40], [7, 8, 9, 10, 11]])
    q = torch.randn(2, 4, 5, 64, generator=torch.Generator().manual_seed(0))
    cos, sin = GPTNeoXRotaryEmbedding(config)(q, positions)
    theirs, _ = apply_rotary_pos_emb(q, q, cos, sin)
    spec = Rope.from_hf(config)
    assert spec.dim == 64 and spec.rotary_dim == 16 and spec.rotary_slice == "leading"
    ours = spec.apply(q, positions)
    torch.testing.assert_close(ours, theirs, rtol=0.0, atol=1e-5)
    assert torch.equal(ours[..., 16:], q[..., 16:])  # the other 48 features pass through
    ours_cos, _ = spec.cos_sin(positions)
    assert ours_cos.shape == cos.shape == (2, 5, 16)
    torch.testing.assert_close(ours_cos, cos, rtol=0.0, atol=1e-5)


def test_trailing_partial_rotary_applies_as_deepseek_v4_does() -> None:
    """DeepSeek-V4 turns the trailing slice of each head, interleaved pairs, its nope
    features first."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import apply_rotary_pos_emb

    spec = Rope(48, 10000.0, "interleaved", rotary_dim=16, rotary_slice="trailing")
    positions = torch.arange(6)
    x = torch.randn(1, 2, 6, 48, generator=torch.Generator().manual_seed(1))
    angles = spec.angles(positions).float()  # (T, 8): one angle per pair, as V4's tables
    theirs = apply_rotary_pos_emb(x, angles.cos()[None], angles.sin()[None])
    ours = spec.apply(x, positions)
    torch.testing.assert_close(ours, theirs, rtol=0.0, atol=1e-5)
    assert torch.equal(ours[..., :32], x[..., :32])


def test_a_partial_spec_scales_only_its_rotating_features_in_attention() -> None:
    """transformers multiplies cos and sin by the attention factor, so the passing
    features are not scaled: the same here, by hand."""
    from rope_lessons.toy.rotary_attention import attention

    spec = Rope.from_theta([1.0, 0.1, 0.01, 0.001], "half", attention_factor=1.5, head_dim=16)
    q = torch.randn(1, 2, 5, 16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    k = torch.randn(1, 2, 5, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    v = torch.randn(1, 2, 5, 16, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    rotating = Rope.from_theta([1.0, 0.1, 0.01, 0.001], "half")

    def turned(x: torch.Tensor) -> torch.Tensor:
        return torch.cat((1.5 * rotating.apply(x[..., :8]), x[..., 8:]), -1)

    scores = turned(q) @ turned(k).transpose(-2, -1) / 4.0
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    expected = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
    torch.testing.assert_close(attention(q, k, v, rope=spec), expected)
    with pytest.raises(ValueError, match="partial rotary"):
        attention(q, k, v, rope=spec, theta=torch.ones(4, dtype=torch.float64))


def test_partial_specs_are_values_and_are_refused_where_every_pair_is_read() -> None:
    import pickle

    spec = Rope(64, 1e4, "half", rotary_dim=16)
    assert spec != Rope(64, 1e4, "half", rotary_dim=16, rotary_slice="trailing")
    assert spec != Rope(16, 1e4, "half") and spec.theta.equal(Rope(16, 1e4).theta)
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert eval(repr(spec), {"Rope": Rope}) == spec  # our own repr
    assert spec.with_layout("interleaved").rotary_dim == 16
    assert spec.to_dict()["rotary_dim"] == 16 and "rotary_dim" not in Rope(64).to_dict()
    assert "partial rotary: the leading 16 features" in spec.describe()
    assert spec.to_hf() == {
        "rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25,
    }  # fmt: skip
    assert Rope.from_hf({"head_dim": 64, "rope_parameters": spec.to_hf()}) == spec
    q = torch.randn(64, dtype=torch.float64)
    with pytest.raises(ValueError, match="reads every pair of a fully rotating head"):
        spec.score_at_distance(q, q, torch.arange(3))
    with pytest.raises(ValueError, match=r"rotary_dim must be even and in 2 \.\. 64"):
        Rope(64, rotary_dim=80)
    with pytest.raises(ValueError, match="rotary_slice must be one of"):
        Rope(64, rotary_dim=16, rotary_slice="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"p = 0\.5, 'leading'"):
        Rope(64, p=0.5, rotary_dim=16).to_hf()


def test_a_gemma4_dict_from_transformers_to_dict_reads_its_full_layers_head_dim() -> None:
    """transformers' Gemma4TextConfig.to_dict() keys per_layer_config by zero-padded layer
    indices ("05"); the dict must give the full layers' head_dim as the object does."""
    import json
    from pathlib import Path

    from rope_lessons.rope.hf_config import hf_head_dim

    gemma4 = getattr(transformers, "Gemma4TextConfig", None)
    if gemma4 is None:
        pytest.skip("this transformers has no Gemma 4")
    published = Path(__file__).parents[1] / "rope_lessons/data/published/gemma4_31b.json"
    fields = json.loads(published.read_text(encoding="utf-8"))["config"]["text_config"]
    config = gemma4(**fields)
    as_dict = config.to_dict()
    assert any(len(key) > 1 and key.startswith("0") for key in as_dict["per_layer_config"])
    for layer_type in ("full_attention", "sliding_attention"):
        assert hf_head_dim(as_dict, layer_type) == hf_head_dim(config, layer_type)
    assert hf_head_dim(as_dict, "full_attention") == 512
