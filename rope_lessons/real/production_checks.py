r"""Production attention layers rebuilt from the course's parts, checked against transformers.

For each family of chapter 10 :func:`check_layer` instantiates transformers'
own attention layer from a tiny random configuration of that family
(:func:`tiny_config`; no weights are needed), runs it on random hidden states
with the mask and position tables transformers' model would build, and runs
the course's :func:`~rope_lessons.toy.rotary_attention.attention` on the same
projections with the spec, window, placement and sinks that
:mod:`rope_lessons.real.production` reads from the configuration. It also runs
each *changed* reading (another layout, the other rotary slice, the output not
turned back, no sinks, no window, ...): the check can fail, and the changed
readings show by how much.

transformers (5.x, with these families) is needed here and nowhere else in the
package's core; it is imported when a check runs.

Shapes: ``B`` batch, ``H`` heads, ``T`` positions, ``D`` head dimension.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from rope_lessons.real.production import (
    compress_rate,
    compressed_positions,
    layer_local,
    layer_placement,
    layer_rope,
    layer_type,
    mla_softmax_scale,
    mrope_sections,
    nope_temperature,
    qk_rms_norm,
    quiet_transformers,
    uses_rope,
)
from rope_lessons.rope.mrope import apply_rope_nd, multimodal_frequencies
from rope_lessons.rope.scaling import yarn_attention_factor
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import Local, Placement, attention, rotate_inputs

# The tiny layers: batch, positions, width, heads, key-value heads, head dimension.
B, T, HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 2, 11, 32, 4, 2, 8
# Equal means equal to float32 rounding: |ours - theirs| <= TOLERANCE * (1 + max |theirs|).
TOLERANCE = 1e-5
# Qwen3.5's pairs per axis (time, height, width) in the tiny configuration: 16 pairs,
# a quarter of 128-dimensional heads.
QWEN_SECTIONS = [6, 5, 5]


@dataclass(frozen=True)
class LayerCheck:
    """One production layer against the course's rebuild.

    Attributes:
        family: the configuration's ``model_type``.
        layer: which layer, in words (``"NoPE layer"``, ...).
        difference: the largest ``|ours - theirs|`` over the layer's output.
        scale: the largest ``|theirs|``, which the tolerance is relative to.
        wrong: each changed reading (a name) and its largest ``|changed - theirs|``.
    """

    family: str
    layer: str
    difference: float
    scale: float
    wrong: dict[str, float]

    @property
    def equal(self) -> bool:
        """Whether ours equals theirs to float32 rounding (:data:`TOLERANCE`)."""
        return self.difference <= TOLERANCE * (1.0 + self.scale)

    @property
    def closest_wrong(self) -> float:
        """The smallest difference any changed reading leaves: the check's margin."""
        return min(self.wrong.values())


def _largest(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


def _result(
    family: str,
    layer: str,
    ours: torch.Tensor,
    theirs: torch.Tensor,
    wrong: dict[str, torch.Tensor],
    project: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> LayerCheck:
    """Compare ours and each changed reading with theirs, after ``project`` (the
    layer's output projection of the heads, for readings given as heads)."""
    if project is not None:
        ours, wrong = project(ours), {name: project(out) for name, out in wrong.items()}
    return LayerCheck(
        family=family,
        layer=layer,
        difference=_largest(ours, theirs),
        scale=float(theirs.abs().max()),
        wrong={name: _largest(changed, theirs) for name, changed in wrong.items()},
    )


def _quiet(make: Any, **fields: Any) -> Any:
    with quiet_transformers():
        return make(**fields, attn_implementation="eager")


def tiny_config(model_type: str) -> Any:
    """A tiny random configuration of a family, as transformers' configuration class.

    ``model_type`` is one of :data:`CHECKS`' families. Widths: ``hidden`` 32, 4
    query heads of 8 features (Gemma 4's full layers 16, DeepSeek-V4's 16 with a
    trailing rotary slice of 8, Qwen3.5's 128 with a rotary quarter), a window
    or chunk of 4 where the family has one.
    """
    import transformers

    common = {"hidden_size": HIDDEN, "num_attention_heads": HEADS}
    grouped = {**common, "num_key_value_heads": KV_HEADS}
    makers: dict[str, Callable[[], Any]] = {
        "smollm3": lambda: _quiet(
            transformers.SmolLM3Config, **grouped, num_hidden_layers=4,
            intermediate_size=64, max_position_embeddings=64,
        ),
        "llama4_text": lambda: _quiet(
            transformers.Llama4TextConfig, **grouped, head_dim=HEAD_DIM, num_hidden_layers=4,
            intermediate_size=64, intermediate_size_mlp=64, max_position_embeddings=64,
            attention_chunk_size=4,  # chunks of 4 in the RoPE layers
            floor_scale=3,  # the NoPE layers' temperature steps up at positions 2, 5, 8
            # Scout's published step (Llama 3's rule with equal factors, by 16), at a base
            # and trained length small enough that it turns 3 of the 4 pairs within a chunk
            rope_parameters={
                "rope_type": "llama3", "rope_theta": 100.0, "factor": 16.0,
                "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                "original_max_position_embeddings": 8,
            },
        ),
        "gpt_oss": lambda: _quiet(
            transformers.GptOssConfig, **grouped, head_dim=HEAD_DIM, num_hidden_layers=2,
            intermediate_size=64, num_local_experts=2, num_experts_per_tok=1, sliding_window=4,
        ),
        "gemma4_text": lambda: _quiet(
            transformers.Gemma4TextConfig, **grouped, head_dim=HEAD_DIM,
            global_head_dim=2 * HEAD_DIM,  # the full layers' heads are wider
            num_global_key_value_heads=1, num_hidden_layers=2,
            layer_types=["sliding_attention", "full_attention"], sliding_window=4,
            attention_k_eq_v=True, intermediate_size=64, vocab_size=64,
            vocab_size_per_layer_input=16, hidden_size_per_layer_input=8,
        ),
        "deepseek_v4": lambda: _quiet(
            transformers.DeepseekV4Config, **common, head_dim=2 * HEAD_DIM,
            qk_rope_head_dim=HEAD_DIM,  # [nope | rope]: the trailing half of each head turns
            q_lora_rank=16, o_groups=2, o_lora_rank=8, num_hidden_layers=3,
            layer_types=[
                "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
            ],
            # one compressed entry per 2 positions (CSA) and per 4 (HCA); the indexer picks 2
            compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
            index_topk=2, sliding_window=4, vocab_size=64,
            moe_intermediate_size=16, n_routed_experts=2, num_experts_per_tok=1,
            index_n_heads=2, index_head_dim=8,
            # the compressed layers' YaRN, as published (legacy names), at a small base and length
            compress_rope_theta=100.0,
            rope_scaling={
                "type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8,
                "beta_fast": 32, "beta_slow": 1,
            },
        ),
        "deepseek_v3": lambda: _quiet(
            transformers.DeepseekV3Config, **common, num_key_value_heads=HEADS,
            q_lora_rank=16, kv_lora_rank=16, v_head_dim=HEAD_DIM,
            qk_nope_head_dim=HEAD_DIM, qk_rope_head_dim=HEAD_DIM,  # 8 turn beside 8 that do not
            num_hidden_layers=1, intermediate_size=64, moe_intermediate_size=16,
            n_routed_experts=2, num_experts_per_tok=1, vocab_size=64, max_position_embeddings=64,
            # YaRN with DeepSeek's mscale and mscale_all_dim, at a small base and length
            rope_parameters={
                "rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
                "original_max_position_embeddings": 8, "beta_fast": 32, "beta_slow": 1,
                "mscale": 1.0, "mscale_all_dim": 1.0,
            },
        ),
        "glm4": lambda: _quiet(
            transformers.Glm4Config, **grouped, head_dim=HEAD_DIM, num_hidden_layers=2,
            intermediate_size=64, vocab_size=64, pad_token_id=0,
            # partial_rotary_factor 0.5 by default: the leading half of each head turns
        ),
        "qwen3_5_text": lambda: _quiet(
            transformers.Qwen3_5TextConfig, **grouped, head_dim=128, num_hidden_layers=4,
            intermediate_size=64, vocab_size=64,
            rope_parameters={
                "rope_type": "default", "rope_theta": 10_000.0,
                "partial_rotary_factor": 0.25, "mrope_section": QWEN_SECTIONS,
            },
        ),
    }  # fmt: skip
    if model_type not in makers:
        raise ValueError(f"no tiny configuration for {model_type!r}; known: {sorted(makers)}")
    return makers[model_type]()


def _projections(layer: Any, hidden: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The layer's queries, keys and values ``(B, H, T, D)``, unrotated."""
    split = (B, T, -1, HEAD_DIM)
    return tuple(
        proj(hidden).view(split).transpose(1, 2)
        for proj in (layer.q_proj, layer.k_proj, layer.v_proj)
    )


def _output(layer: Any, out: torch.Tensor) -> torch.Tensor:
    """``o_proj`` of the heads ``(B, H, T, D)`` -> ``(B, T, hidden)``."""
    projected: torch.Tensor = layer.o_proj(out.transpose(1, 2).reshape(B, T, -1))
    return projected


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


def _smollm3(layer_idx: int) -> LayerCheck:
    from transformers.models.smollm3.modeling_smollm3 import (
        SmolLM3Attention,
        SmolLM3RotaryEmbedding,
    )

    config = tiny_config("smollm3")
    layer = SmolLM3Attention(config, layer_idx=layer_idx).eval()
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    theirs, _ = layer(hidden, SmolLM3RotaryEmbedding(config)(hidden, positions), mask)
    q, k, v = _projections(layer, hidden)
    spec = layer_rope(config, layer_idx)
    if spec is None:
        ours = attention(q, k, v, placement="nope")
        wrong = {"rotated": attention(q, k, v, placement="qk")}
    else:
        ours = attention(q, k, v, rope=spec, placement="qk")
        wrong = {"not rotated": attention(q, k, v, placement="nope")}
    return _result(
        "smollm3",
        "RoPE layer" if spec else "NoPE layer",
        ours,
        theirs,
        wrong,
        project=partial(_output, layer),
    )


def _llama4(layer_idx: int) -> LayerCheck:
    from transformers.models.llama4.modeling_llama4 import (
        Llama4TextAttention,
        Llama4TextRotaryEmbedding,
    )

    config = tiny_config("llama4_text")
    layer = Llama4TextAttention(config, layer_idx=layer_idx).eval()
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    theirs, _ = layer(hidden, Llama4TextRotaryEmbedding(config)(hidden, positions), mask)
    spec, local = layer_rope(config, layer_idx), layer_local(config, layer_idx)
    q, k, v = _projections(layer, hidden)
    if spec is not None:  # QK norm; a rotation keeps the norm, so before RoPE is the same
        q, k = qk_rms_norm(q, config.rms_norm_eps), qk_rms_norm(k, config.rms_norm_eps)
        ours = attention(q, k, v, rope=spec, local=local)
        base = float(config.rope_parameters["rope_theta"])
        wrong = {
            "half layout": attention(q, k, v, rope=spec.with_layout("half"), local=local),
            "no chunks": attention(q, k, v, rope=spec),
            "without Llama 3's step": attention(
                q, k, v, rope=Rope(spec.dim, base, "interleaved"), local=local
            ),
        }
        name = "chunked RoPE layer"
    else:
        scales = nope_temperature(
            torch.arange(T), floor_scale=config.floor_scale, attn_scale=config.attn_scale
        )
        scaled = q * scales[:, None]  # (B, H, T, D) times (T, 1)
        ours = attention(scaled, k, v, placement="nope", local=local)
        wrong = {"no temperature": attention(q, k, v, placement="nope")}
        name = "NoPE layer"
    return _result("llama4_text", name, ours, theirs, wrong, project=partial(_output, layer))


def _gpt_oss(layer_idx: int) -> LayerCheck:
    from transformers.models.gpt_oss.modeling_gpt_oss import (
        GptOssAttention,
        GptOssRotaryEmbedding,
    )

    config = tiny_config("gpt_oss")
    layer = GptOssAttention(config, layer_idx=layer_idx).eval()
    torch.nn.init.normal_(layer.sinks, std=2.0)  # transformers leaves them to the model's init
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    theirs, _ = layer(hidden, GptOssRotaryEmbedding(config)(hidden, positions), mask)
    local, spec = layer_local(config, layer_idx), layer_rope(config, layer_idx)
    assert spec is not None
    q, k, v = _projections(layer, hidden)
    ours = attention(q, k, v, rope=spec, local=local, sinks=layer.sinks)
    plain = Rope.from_theta(spec.theta, "half")  # YaRN's frequencies without its factor
    wrong = {
        "no sinks": attention(q, k, v, rope=spec, local=local),
        "no YaRN attention factor": attention(q, k, v, rope=plain, local=local, sinks=layer.sinks),
    }
    if local is not None:
        wrong["no window"] = attention(q, k, v, rope=spec, sinks=layer.sinks)
    return _result(
        "gpt_oss",
        "sliding layer" if local else "full layer",
        ours,
        theirs,
        wrong,
        project=partial(_output, layer),
    )


def _gemma4(layer_idx: int) -> LayerCheck:
    from transformers.models.gemma4.modeling_gemma4 import (
        Gemma4TextAttention,
        Gemma4TextRotaryEmbedding,
    )

    config = tiny_config("gemma4_text")
    layer = Gemma4TextAttention(config, layer_idx=layer_idx).eval()
    for norm in (layer.q_norm, layer.k_norm):  # weights other than ones, so that they count
        torch.nn.init.normal_(norm.weight, 1.0, 0.2)
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    kind, local = layer_type(config, layer_idx), layer_local(config, layer_idx)
    rotary = Gemma4TextRotaryEmbedding(config)(hidden, positions, kind)
    theirs, _ = layer(hidden, rotary, mask, shared_kv_states={})
    spec = layer_rope(config, layer_idx)
    assert spec is not None
    dim = spec.dim

    def heads(x: torch.Tensor) -> torch.Tensor:  # (B, T, H*D) -> (B, T, H, D)
        return x.view(B, T, -1, dim)

    keys = heads(layer.k_proj(hidden))
    values = keys if layer.v_proj is None else heads(layer.v_proj(hidden))  # K = V
    q = layer.q_norm(heads(layer.q_proj(hidden))).transpose(1, 2)
    k = layer.k_norm(keys).transpose(1, 2)
    v = layer.v_norm(values).transpose(1, 2)
    q = q * dim**0.5  # Gemma 4 takes q . k without 1/sqrt(D) (its norms set the scale)
    ours = attention(q, k, v, rope=spec, local=local)
    if local is None:  # the full layer: HF partial rotary on the same quarter, or v rotated
        wrong = {
            "HF partial rotary": attention(
                q, k, v, rope=Rope(dim, 1e6, "half", rotary_dim=dim // 4)
            ),
            "value rotated too": attention(q, k, v, rope=spec, placement="qkv"),
        }
    else:  # the full layers' base, or no window
        wrong = {
            "base 1e6": attention(q, k, v, rope=Rope(dim, 1e6, "half"), local=local),
            "no window": attention(q, k, v, rope=spec),
        }
    return _result(
        "gemma4_text",
        "sliding layer" if local else "full layer, K = V",
        ours,
        theirs,
        wrong,
        project=partial(_output, layer),
    )


def _deepseek_v4(layer_idx: int) -> LayerCheck:
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
        DeepseekV4Attention,
        DeepseekV4RotaryEmbedding,
    )

    config = tiny_config("deepseek_v4")
    layer = DeepseekV4Attention(config, layer_idx=layer_idx).eval()
    torch.nn.init.normal_(layer.sinks, std=2.0)
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    rotary = DeepseekV4RotaryEmbedding(config)
    embeddings = {kind: rotary(hidden, positions, kind) for kind in ("main", "compress")}
    theirs, _ = layer(hidden, embeddings, positions, mask)
    spec, local = layer_rope(config, layer_idx), layer_local(config, layer_idx)
    assert spec is not None
    dim = spec.dim
    placement = layer_placement(config, layer_idx)  # "qkvo"

    def project(out: torch.Tensor) -> torch.Tensor:  # (B, H, T, D) -> (B, T, hidden)
        grouped = out.transpose(1, 2).reshape(B, T, config.o_groups, -1)
        projected: torch.Tensor = layer.o_b_proj(layer.o_a_proj(grouped).flatten(2))
        return projected

    q = layer.q_b_norm(
        layer.q_b_proj(layer.q_a_norm(layer.q_a_proj(hidden))).view(B, T, -1, dim).transpose(1, 2)
    )
    kv = layer.kv_norm(layer.kv_proj(hidden)).view(B, T, 1, dim).transpose(1, 2)  # K = V
    sinks = layer.sinks
    ours = attention(q, kv, kv, placement=placement, rope=spec, local=local, sinks=sinks)
    leading = Rope.from_theta(spec.theta, "interleaved", head_dim=dim)  # the first slice
    wrong = {
        "output not turned back": attention(
            q, kv, kv, placement="qkv", rope=spec, local=local, sinks=sinks
        ),
        "leading slice": attention(
            q, kv, kv, placement=placement, rope=leading, local=local, sinks=sinks
        ),
        "half layout": attention(
            q, kv, kv, placement=placement, rope=spec.with_layout("half"), local=local, sinks=sinks
        ),
    }
    return _result("deepseek_v4", "sliding layer, K = V", ours, theirs, wrong, project=project)


class _Unturned(torch.nn.Module):
    """A rotary embedding that turns nothing (cosines 1, sines 0): put in place of a
    DeepSeek-V4 compressor's own, it returns the compressed entries before RoPE."""

    def __init__(self, pairs: int) -> None:
        super().__init__()
        self.pairs = pairs

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (*position_ids.shape, self.pairs)
        return torch.ones(shape, dtype=x.dtype), torch.zeros(shape, dtype=x.dtype)


def _deepseek_v4_compressed(layer_idx: int) -> LayerCheck:
    """A compressed layer (CSA or HCA): the window's keys and the compressed entries,
    one key-value tensor turned by the compressed ladder, the output turned back.

    What is not RoPE is taken from transformers' own modules: the pooling of each
    block of positions into an entry (the compressor, run with its rotation switched
    off) and which entries each query may read (causal blocks, and in CSA the
    indexer's top-k). The course turns every entry at its block's first position."""
    from transformers.masking_utils import create_sliding_window_causal_mask
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
        DeepseekV4Attention,
        DeepseekV4RotaryEmbedding,
    )

    config = tiny_config("deepseek_v4")
    layer = DeepseekV4Attention(config, layer_idx=layer_idx).eval()
    torch.nn.init.normal_(layer.sinks, std=2.0)
    compressor: Any = layer.compressor  # the CSA or HCA compressor
    for module in compressor.modules():  # transformers leaves the position biases to init
        bias = getattr(module, "position_bias", None)
        if isinstance(bias, torch.nn.Parameter):
            torch.nn.init.normal_(bias, std=1.0)
    hidden = torch.randn(B, T, HIDDEN)
    positions = torch.arange(T).expand(B, T)
    mask = create_sliding_window_causal_mask(
        config=config, inputs_embeds=hidden, attention_mask=None,
        past_key_values=None, position_ids=positions,
    )  # fmt: skip
    rotary = DeepseekV4RotaryEmbedding(config)
    embeddings = {kind: rotary(hidden, positions, kind) for kind in ("main", "compress")}
    theirs, _ = layer(hidden, embeddings, positions, mask)

    spec = layer_rope(config, layer_idx)
    assert spec is not None
    dim, kind = spec.dim, layer_type(config, layer_idx)
    rate = compress_rate(config, layer_idx)
    q_residual = layer.q_a_norm(layer.q_a_proj(hidden))
    q = layer.q_b_norm(layer.q_b_proj(q_residual).view(B, T, -1, dim).transpose(1, 2))
    kv = layer.kv_norm(layer.kv_proj(hidden)).view(B, T, 1, dim).transpose(1, 2)  # K = V
    turning, compressor.rotary_emb = compressor.rotary_emb, _Unturned(spec.rotary_dim // 2)
    try:  # the entries before RoPE (B, 1, W, D), and which a query reads (B, 1, T, W)
        entries, readable = compressor(hidden, q_residual, positions, None, layer_idx)
    finally:
        compressor.rotary_emb = turning
    keys = torch.cat((kv, entries), dim=2)  # K = V: the window's T, then the W entries
    window = (
        Local(int(config.sliding_window)).allows(torch.arange(T)[:, None], torch.arange(T)[None, :])
        & torch.ones(T, T, dtype=torch.bool).tril()
    )
    visible = torch.cat((window.expand(B, 1, T, T), readable == 0), dim=-1)
    starts = compressed_positions(config, layer_idx, T)  # (W,): each block's first position

    def read(rope: Rope, at: torch.Tensor, placement: Placement = "qkvo") -> torch.Tensor:
        return attention(
            q, keys, keys, placement=placement, rope=rope, causal=False,
            q_positions=torch.arange(T), k_positions=torch.cat((torch.arange(T), at)),
            attn_mask=visible, sinks=layer.sinks,
        )  # fmt: skip

    ours = read(spec, starts)
    main = layer_rope(config, 0)  # the sliding layers' ladder: base 10^4, no YaRN
    assert main is not None and layer_type(config, 0) == "sliding_attention"
    factor = float(config.rope_parameters["compress"]["factor"])
    yarn_factor = Rope.from_theta(  # 0.1 ln s + 1, which transformers sets to 1 here
        spec.theta, spec.layout, attention_factor=yarn_attention_factor(factor),
        head_dim=dim, rotary_slice=spec.rotary_slice,
    )  # fmt: skip
    wrong = {
        "at each block's last position": read(spec, starts + rate - 1),
        "the sliding layers' ladder": read(main, starts),
        "YaRN's attention factor": read(yarn_factor, starts),
        "output not turned back": read(spec, starts, "qkv"),
    }

    def project(out: torch.Tensor) -> torch.Tensor:  # (B, H, T, D) -> (B, T, hidden)
        grouped = out.transpose(1, 2).reshape(B, T, config.o_groups, -1)
        projected: torch.Tensor = layer.o_b_proj(layer.o_a_proj(grouped).flatten(2))
        return projected

    name = {"compressed_sparse_attention": "CSA", "heavily_compressed_attention": "HCA"}[kind]
    return _result(
        "deepseek_v4", f"{name} layer, 1 entry per {rate}", ours, theirs, wrong, project=project
    )


def _deepseek_v3(layer_idx: int) -> LayerCheck:
    """MLA: per head, features from the latent that never turn beside a rotating part
    whose key is one per position, shared by every head; the softmax scale multiplied
    by DeepSeek's ``mscale`` squared."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Attention,
        DeepseekV3RotaryEmbedding,
    )

    config = tiny_config("deepseek_v3")
    layer: Any = DeepseekV3Attention(config, layer_idx=layer_idx).eval()  # q_lora_rank set
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    theirs, _ = layer(hidden, DeepseekV3RotaryEmbedding(config)(hidden, positions), mask)
    spec = layer_rope(config, layer_idx)  # the rotating part alone
    assert spec is not None
    unrotated, rotating = config.qk_nope_head_dim, config.qk_rope_head_dim
    query = layer.q_b_proj(layer.q_a_layernorm(layer.q_a_proj(hidden)))
    q_pass, q_rot = query.view(B, T, HEADS, -1).transpose(1, 2).split([unrotated, rotating], -1)
    latent, k_rot = layer.kv_a_proj_with_mqa(hidden).split([config.kv_lora_rank, rotating], -1)
    expanded = layer.kv_b_proj(layer.kv_a_layernorm(latent)).view(B, T, HEADS, -1).transpose(1, 2)
    k_pass, v = expanded.split([unrotated, config.v_head_dim], -1)
    k_rot = k_rot.view(B, 1, T, rotating)  # one rotating key per position, for every head
    scale = mla_softmax_scale(config)

    def read(rope: Rope, softmax_scale: float) -> torch.Tensor:
        q_turned, k_turned, _ = rotate_inputs(q_rot, k_rot, k_rot, rope=rope)
        q = torch.cat((q_pass, q_turned), -1) * softmax_scale  # attention divides by sqrt(D)
        k = torch.cat((k_pass, k_turned.expand(B, HEADS, T, rotating)), -1)
        return attention(q, k, v, placement="nope")  # turned already

    as_yarn_factor = Rope.from_theta(spec.theta, spec.layout, attention_factor=scale**0.5)
    wrong = {
        "without mscale squared": read(spec, 1.0),
        "mscale on the rotating part only": read(as_yarn_factor, 1.0),
        "half layout": read(spec.with_layout("half"), scale),
        "no YaRN": read(Rope(rotating, float(config.rope_parameters["rope_theta"])), scale),
    }
    return _result(
        "deepseek_v3", "MLA, decoupled RoPE", read(spec, scale), theirs, wrong,
        project=partial(_output, layer),
    )  # fmt: skip


def _glm4(layer_idx: int) -> LayerCheck:
    from transformers.models.glm4.modeling_glm4 import Glm4Attention, Glm4RotaryEmbedding

    config = tiny_config("glm4")
    layer = Glm4Attention(config, layer_idx=layer_idx).eval()
    hidden, positions, mask = _hidden_and_mask(config, layer_idx)
    theirs, _ = layer(hidden, Glm4RotaryEmbedding(config)(hidden, positions), mask)
    spec = layer_rope(config, layer_idx)
    assert spec is not None
    q, k, v = _projections(layer, hidden)
    ours = attention(q, k, v, rope=spec)
    whole = Rope(spec.dim, spec.base or 10_000.0, "interleaved")  # the whole head turning
    wrong = {
        "half layout": attention(q, k, v, rope=spec.with_layout("half")),
        "the whole head turning": attention(q, k, v, rope=whole),
    }
    return _result(
        "glm4", "leading half, interleaved", ours, theirs, wrong, project=partial(_output, layer)
    )


def qwen_positions() -> torch.Tensor:
    """``(3, B, T)`` positions on (time, height, width): three text tokens, a 2 x 3
    image, two text tokens, as Qwen's ``get_rope_index`` places them."""
    text_before = torch.arange(3).expand(3, 3)
    rows, columns = torch.meshgrid(torch.arange(2), torch.arange(3), indexing="ij")
    image = torch.stack((torch.full((6,), 3), 3 + rows.flatten(), 3 + columns.flatten()))
    text_after = (6 + torch.arange(2)).expand(3, 2)
    return torch.cat((text_before, image, text_after), dim=1)[:, None].expand(3, B, T)


def _qwen3_5(layer_idx: int) -> LayerCheck:
    from transformers.masking_utils import create_causal_mask
    from transformers.models.qwen3_5.modeling_qwen3_5 import (
        Qwen3_5Attention,
        Qwen3_5TextRotaryEmbedding,
    )

    config = tiny_config("qwen3_5_text")
    layer = Qwen3_5Attention(config, layer_idx=layer_idx).eval()
    for norm in (layer.q_norm, layer.k_norm):
        torch.nn.init.normal_(norm.weight, 0.0, 0.2)
    hidden = torch.randn(B, T, HIDDEN)
    positions = qwen_positions()  # (3, B, T)
    mask = create_causal_mask(
        config=config, inputs_embeds=hidden, attention_mask=None,
        past_key_values=None, position_ids=None,
    )  # fmt: skip
    theirs, _ = layer(hidden, Qwen3_5TextRotaryEmbedding(config)(hidden, positions), mask)
    spec, sections = layer_rope(config, layer_idx), mrope_sections(config)
    assert spec is not None and sections is not None
    rotary_dim, dim = spec.rotary_dim, spec.dim

    def turned(x: torch.Tensor, assignment: Any) -> torch.Tensor:  # the leading slice turns
        freqs = multimodal_frequencies(spec.theta, sections[0], assignment)
        axes = [p[:, None, :] for p in positions]  # each (B, 1, T)
        head = apply_rope_nd(x[..., :rotary_dim], axes, freqs, layout="half")
        return torch.cat((head, x[..., rotary_dim:]), dim=-1)

    query, gate = torch.chunk(layer.q_proj(hidden).view(B, T, -1, 2 * dim), 2, dim=-1)
    q = layer.q_norm(query).transpose(1, 2)
    k = layer.k_norm(layer.k_proj(hidden).view(B, T, -1, dim)).transpose(1, 2)
    v = layer.v_proj(hidden).view(B, T, -1, dim).transpose(1, 2)

    def output(q_turned: torch.Tensor, k_turned: torch.Tensor) -> torch.Tensor:
        out = attention(q_turned, k_turned, v, placement="nope")  # turned already
        gated = out.transpose(1, 2).reshape(B, T, -1) * torch.sigmoid(gate.reshape(B, T, -1))
        projected: torch.Tensor = layer.o_proj(gated)
        return projected

    wrong = {
        "Qwen2-VL sections": output(turned(q, "sections"), turned(k, "sections")),
        "text positions only": output(spec.apply(q), spec.apply(k)),
    }
    ours = output(turned(q, sections[1]), turned(k, sections[1]))
    return _result("qwen3_5_text", "full layer, text and image", ours, theirs, wrong)


# Every check: family, layer index and the function that runs it.
CHECKS: tuple[tuple[str, int, Callable[[int], LayerCheck]], ...] = (
    ("smollm3", 0, _smollm3),
    ("smollm3", 3, _smollm3),
    ("llama4_text", 0, _llama4),
    ("llama4_text", 3, _llama4),
    ("gpt_oss", 0, _gpt_oss),
    ("gpt_oss", 1, _gpt_oss),
    ("gemma4_text", 0, _gemma4),
    ("gemma4_text", 1, _gemma4),
    ("deepseek_v4", 0, _deepseek_v4),
    ("deepseek_v4", 1, _deepseek_v4_compressed),
    ("deepseek_v4", 2, _deepseek_v4_compressed),
    ("deepseek_v3", 0, _deepseek_v3),
    ("glm4", 0, _glm4),
    ("qwen3_5_text", 3, _qwen3_5),
)


def check_layer(model_type: str, layer_idx: int, seed: int = 0) -> LayerCheck:
    """Run one of :data:`CHECKS`: transformers' layer against the course's rebuild.

    Args:
        model_type: the family (``"smollm3"``, ``"llama4_text"``, ``"gpt_oss"``,
            ``"gemma4_text"``, ``"deepseek_v4"``, ``"glm4"``, ``"qwen3_5_text"``).
        layer_idx: a layer of :func:`tiny_config` listed in :data:`CHECKS`.
        seed: seeds the layer's random weights and the hidden states.

    Raises:
        ValueError: for a family or layer without a check.
    """
    for family, index, run in CHECKS:
        if (family, index) == (model_type, layer_idx):
            torch.manual_seed(seed)
            with torch.no_grad():
                return run(layer_idx)
    known = [(family, index) for family, index, _ in CHECKS]
    raise ValueError(f"no check for layer {layer_idx} of {model_type!r}; known: {known}")


def check_all(seed: int = 0) -> list[LayerCheck]:
    """Every check of :data:`CHECKS`, in order."""
    return [check_layer(family, index, seed) for family, index, _ in CHECKS]
