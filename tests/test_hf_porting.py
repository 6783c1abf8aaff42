"""Porting traps: configurations read as transformers reads them, against transformers'
own rotary embeddings and apply_rotary_pos_emb (Phi-3's config.json, both rope_parameters
and rope_scaling, the length that dynamic NTK and LongRoPE read, the attention factor in
apply, odd partial rotary), and the inputs refused by name."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import attention

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama.modeling_llama import (  # noqa: E402
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

# Phi-3-mini-128k's config.json, as the hub keeps it (factors shortened to a pattern):
# the trained length sits beside rope_scaling, not in it.
HEAD_DIM = 96
PHI3_JSON: dict[str, Any] = {
    "model_type": "phi3",
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rope_scaling": {
        "type": "longrope",
        "long_factor": [1.0 + 0.5 * k for k in range(HEAD_DIM // 2)],
        "short_factor": [1.0 + 0.01 * k for k in range(HEAD_DIM // 2)],
    },
}


def quietly(build: Any, **fields: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build(**fields)


def their_q_embed(config: Any, q: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """transformers' rotated queries: its rotary embedding's tables (which read the
    length from the positions), then apply_rotary_pos_emb."""
    cos, sin = LlamaRotaryEmbedding(config)(q, positions)
    q_embed, _ = apply_rotary_pos_emb(q, q, cos, sin)
    return torch.as_tensor(q_embed)


def queries(length: int, dim: int = HEAD_DIM) -> torch.Tensor:
    return torch.randn(1, 2, length, dim, generator=torch.Generator().manual_seed(0))


def test_phi3_config_json_reads_the_trained_length_beside_rope_scaling() -> None:
    config = quietly(transformers.Phi3Config, **PHI3_JSON)
    for seq_len in (4096, 8192):
        theirs, their_factor = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=seq_len)
        spec = Rope.from_hf(PHI3_JSON, seq_len=seq_len)  # the dict, as json.load gives it
        assert spec == Rope.from_hf(config, seq_len=seq_len)
        assert spec.attention_factor == pytest.approx(their_factor, rel=1e-12)
        assert spec.attention_factor == pytest.approx(1.1902, abs=1e-4)
        torch.testing.assert_close(spec.theta, theirs.double(), rtol=5e-6, atol=0.0)
    # and the queries transformers rotates, at 8192 positions (the long factors)
    positions = torch.arange(8192)[None]
    q = queries(8192)
    ours = Rope.from_hf(PHI3_JSON, seq_len=8192).apply(q, positions)
    torch.testing.assert_close(ours, their_q_embed(config, q, positions), rtol=0.0, atol=5e-3)


def test_two_trained_lengths_that_differ_are_refused() -> None:
    both = {**PHI3_JSON, "rope_scaling": {**PHI3_JSON["rope_scaling"]}}
    both["rope_scaling"]["original_max_position_embeddings"] = 2048
    with pytest.raises(ValueError, match=r"two trained lengths.*Phi3Config reads the top-level"):
        Rope.from_hf(both, seq_len=8192)
    both["rope_scaling"]["original_max_position_embeddings"] = 4096  # the same: fine
    assert Rope.from_hf(both, seq_len=8192) == Rope.from_hf(PHI3_JSON, seq_len=8192)


def test_rope_parameters_beside_a_different_rope_scaling_are_refused() -> None:
    fields = {"hidden_size": 512, "num_attention_heads": 8, "max_position_embeddings": 16384}
    ambiguous = {
        **fields,
        "rope_theta": 5e5,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
        "rope_scaling": {"rope_type": "linear", "factor": 4.0},
    }
    # what transformers does with it: rope_scaling wins, with the top-level theta
    read = quietly(transformers.LlamaConfig, **ambiguous).rope_parameters
    assert read == {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5}
    with pytest.raises(ValueError, match="configuration classes read rope_scaling"):
        Rope.from_hf(ambiguous)
    agreeing = {
        **fields,
        "rope_theta": 5e5,
        "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5e5},
        "rope_scaling": {"type": "linear", "factor": 4.0},
    }
    assert Rope.from_hf(agreeing) == Rope.from_hf(quietly(transformers.LlamaConfig, **agreeing))


def dynamic_config() -> Any:
    return quietly(
        transformers.LlamaConfig,
        hidden_size=8 * 64,
        num_attention_heads=8,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4},
    )


def test_dynamic_ntk_needs_the_length_transformers_reads_from_the_positions() -> None:
    config = dynamic_config()
    with pytest.raises(ValueError, match=r"give seq_len.*max\(position_ids\) \+ 1"):
        Rope.from_hf(config)
    positions = torch.arange(8192)[None]
    q = queries(8192, 64)
    theirs = their_q_embed(config, q, positions)
    ours = Rope.from_hf(config, seq_len=8192).apply(q, positions)
    torch.testing.assert_close(ours, theirs, rtol=0.0, atol=5e-3)
    # the largest position, 8191, is one short of what transformers uses
    off_by_one = Rope.from_hf(config, seq_len=8191).apply(q, positions)
    assert float((off_by_one - theirs).abs().max()) > 0.05


@pytest.mark.parametrize("seq_len", [0, -5, True, 8192.0])
def test_a_length_that_is_not_a_positive_int_is_refused(seq_len: Any) -> None:
    with pytest.raises(ValueError, match="seq_len must be a positive int"):
        Rope.from_hf(dynamic_config(), seq_len=seq_len)


@pytest.mark.parametrize(
    "parameters",
    [
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
        {
            "rope_type": "longrope",
            "factor": 4.0,
            "long_factor": [1.0 + 0.5 * k for k in range(32)],
            "short_factor": [1.0] * 32,
            "original_max_position_embeddings": 1024,
        },
    ],
    ids=["yarn", "longrope"],
)
def test_apply_scales_by_the_attention_factor_as_transformers_q_embed_does(
    parameters: dict[str, Any],
) -> None:
    config = quietly(
        transformers.LlamaConfig,
        hidden_size=8 * 64,
        num_attention_heads=8,
        max_position_embeddings=4096,
        rope_parameters={**parameters, "rope_theta": 1e4},
    )
    positions = torch.arange(2048)[None]
    seq_len = 2048 if parameters["rope_type"] == "longrope" else None
    spec = Rope.from_hf(config, seq_len=seq_len)
    assert spec.attention_factor > 1.05
    q = queries(2048, 64)
    theirs = their_q_embed(config, q, positions)
    torch.testing.assert_close(spec.apply(q, positions), theirs, rtol=0.0, atol=2e-3)
    rotation_only = spec.apply(q, positions, scale=False)
    torch.testing.assert_close(rotation_only * spec.attention_factor, theirs, rtol=0, atol=2e-3)


def test_half_precision_frequencies_and_far_positions_are_refused() -> None:
    theta = Rope(64, 1e4).theta
    for dtype in (torch.float16, torch.bfloat16):
        with pytest.raises(TypeError, match="half-precision frequencies"):
            Rope.from_theta(theta.to(dtype))
        with pytest.raises(TypeError, match="half-precision frequencies"):
            apply_rope(torch.randn(4, 64), theta=theta.to(dtype))
    Rope.from_theta(theta.float())  # float32 frequencies, as transformers keeps them: fine
    x = torch.randn(2, 64)
    with pytest.raises(ValueError, match=r"hold 4611686018427387904, beyond \+-2\*\*40"):
        apply_rope(x, torch.tensor([0, 2**62]))
    with pytest.raises(ValueError, match=r"beyond \+-2\*\*40"):
        Rope(64).apply(x, torch.tensor([-(2**63), 0]))
    assert apply_rope(x, torch.tensor([0, 2**40])).isfinite().all()


def test_equal_specs_convert_alike_and_proportional_round_trips() -> None:
    gemma = {
        "head_dim": 512,
        "rope_parameters": {
            "rope_type": "proportional",
            "rope_theta": 1e6,
            "partial_rotary_factor": 0.25,
        },
    }
    read = Rope.from_hf(gemma)
    by_hand = Rope(512, 1e6, "half", p=0.25)
    assert read == by_hand
    assert read.to_hf() == by_hand.to_hf() == gemma["rope_parameters"]
    from_values = Rope.from_theta(by_hand.theta, "half")  # equal, built from frequencies
    assert from_values == by_hand and from_values.to_hf() == by_hand.to_hf()
    yarn = Rope.from_hf(
        {
            "head_dim": 64,
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0},
        }
    )
    with pytest.raises(ValueError, match="keep the configuration it came from"):
        yarn.to_hf()


@pytest.mark.parametrize(
    ("rope_type", "missing"),
    [
        ("linear", "['factor']"),
        ("dynamic", "['factor']"),
        ("llama3", "['factor', 'low_freq_factor', 'high_freq_factor']"),
        ("longrope", "['long_factor', 'short_factor']"),
    ],
)
def test_a_missing_field_is_named(rope_type: str, missing: str) -> None:
    config = {
        "head_dim": 64,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": rope_type, "rope_theta": 1e4},
    }
    seq_len = 4096 if rope_type in ("dynamic", "longrope") else None
    with pytest.raises(ValueError, match=re.escape(f"{rope_type}' needs {missing}")):
        Rope.from_hf(config, seq_len=seq_len)


def test_a_path_to_a_config_json_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(PHI3_JSON))
    expected = Rope.from_hf(PHI3_JSON, seq_len=8192)
    assert Rope.from_hf(tmp_path / "config.json", seq_len=8192) == expected
    assert Rope.from_hf(str(tmp_path), seq_len=8192) == expected  # the model's folder
    with pytest.raises(FileNotFoundError, match=r"'config\.json' is not a configuration"):
        Rope.from_hf("config.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="holds a JSON list"):
        Rope.from_hf(tmp_path / "list.json")


def test_an_odd_partial_rotary_count_is_read_as_transformers_rotates_it() -> None:
    """partial_rotary_factor 0.3 of 64 is 19 in transformers: 10 pairs (20 features) at
    exponents over 19."""
    from transformers.models.gpt_neox.modeling_gpt_neox import (
        GPTNeoXRotaryEmbedding,
    )
    from transformers.models.gpt_neox.modeling_gpt_neox import (
        apply_rotary_pos_emb as neox_apply,
    )

    config = quietly(
        transformers.GPTNeoXConfig,
        hidden_size=256,
        num_attention_heads=4,
        rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.3},
    )
    positions = torch.arange(300)[None]
    q = queries(300, 64)
    cos, sin = GPTNeoXRotaryEmbedding(config)(q, positions)
    theirs, _ = neox_apply(q, q, cos, sin)
    spec = Rope.from_hf(config)
    assert (spec.dim, spec.rotary_dim) == (64, 20) == (64, cos.shape[-1])
    torch.testing.assert_close(spec.apply(q, positions), theirs, rtol=0.0, atol=1e-4)
    with pytest.raises(ValueError, match=r"odd count.*'default' only"):
        Rope.from_hf(
            {
                "head_dim": 64,
                "max_position_embeddings": 4096,
                "partial_rotary_factor": 0.3,
                "rope_parameters": {"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0},
            }
        )


def test_attention_names_a_dtype_mismatch() -> None:
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(TypeError, match=r"share one dtype.*float32, torch\.float64"):
        attention(q, q.double(), q)
