"""A small transformer whose position encoding is one switch in its config.

Pre-LayerNorm blocks in the style of nanoGPT (A. Karpathy), with attention
from :func:`rope_lessons.attention.attention`, so that every chapter trains the
same model and changes one field of :class:`ModelConfig`.

Shapes: ``B`` batch, ``T`` sequence length, ``C`` model width, ``H`` heads,
``D = C / H`` head dimension, ``V`` vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import torch
from torch import nn

from rope_lessons._checks import (
    check_base,
    check_choice,
    check_fraction,
    check_layout,
    check_positive_int,
)
from rope_lessons.attention import PLACEMENTS, Placement, attention
from rope_lessons.encodings import ABSOLUTE_ENCODINGS, absolute_encoding
from rope_lessons.rope import Layout

PositionKind = Literal[
    "none", "learned", "integer", "normalised_integer", "binary", "sinusoidal", "rope"
]
POSITION_KINDS = ("none", "learned", *ABSOLUTE_ENCODINGS, "rope")


@dataclass(frozen=True)
class ModelConfig:
    """Everything that defines a :class:`TinyTransformer`.

    Attributes:
        vocab_size: number of token ids ``V``.
        dim: model width ``C``.
        n_layers: number of transformer blocks.
        n_heads: attention heads; ``dim / n_heads`` must be even.
        mlp_ratio: hidden width of the MLP, in multiples of ``dim``.
        causal: mask future tokens (a decoder) or not (an encoder).
        position: ``"none"`` (NoPE), ``"learned"`` (a trained table of
            ``max_len`` rows), an absolute encoding added to the embeddings
            (``"integer"``, ``"normalised_integer"``, ``"binary"``,
            ``"sinusoidal"``), or ``"rope"``.
        max_len: rows of the learned table; other encodings take any length.
        rope: where RoPE rotates (see :mod:`rope_lessons.attention`).
        rope_base, rope_layout, rope_p: RoPE's base, layout and p-RoPE fraction.
    """

    vocab_size: int
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    mlp_ratio: int = 4
    causal: bool = True
    position: PositionKind = "rope"
    max_len: int = 512
    rope: Placement = "qk"
    rope_base: float = 10000.0
    rope_layout: Layout = "interleaved"
    rope_p: float = 1.0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "mlp_ratio", "max_len"):
            check_positive_int(getattr(self, name), name)
        if self.dim % self.n_heads or (self.dim // self.n_heads) % 2:
            raise ValueError(
                f"dim / n_heads must be an even integer, got dim={self.dim}, n_heads={self.n_heads}"
            )
        check_choice(self.position, "position", POSITION_KINDS)
        check_choice(self.rope, "rope", PLACEMENTS)
        check_base(self.rope_base)
        check_layout(self.rope_layout)
        check_fraction(self.rope_p, "rope_p")

    @property
    def head_dim(self) -> int:
        """``D = dim / n_heads``."""
        return self.dim // self.n_heads


@lru_cache(maxsize=32)
def _absolute_table(kind: str, seq_len: int, dim: int, device: torch.device) -> torch.Tensor:
    """An absolute encoding table ``(T, C)`` on ``device``, built once per length."""
    return absolute_encoding(kind, seq_len, dim).to(device)  # type: ignore[arg-type]


class SelfAttention(nn.Module):
    """Multi-head self-attention with the configured RoPE placement."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.proj = nn.Linear(config.dim, config.dim, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` ``(B, T, C)`` -> output ``(B, T, C)`` and weights ``(B, H, T, T)`` or None."""
        cfg = self.config
        q, k, v = self.qkv(x).split(cfg.dim, dim=-1)  # (B, T, C) each
        q, k, v = (t.unflatten(-1, (cfg.n_heads, cfg.head_dim)).transpose(1, 2) for t in (q, k, v))
        # q, k, v: (B, H, T, D)
        rope = cfg.rope if cfg.position == "rope" else "nope"
        kwargs = dict(
            rope=rope,
            causal=cfg.causal,
            positions=positions,
            base=cfg.rope_base,
            layout=cfg.rope_layout,
            p=cfg.rope_p,
        )
        if return_weights:
            out, weights = attention(q, k, v, return_weights=True, **kwargs)  # type: ignore[arg-type]
        else:
            out, weights = attention(q, k, v, **kwargs), None  # type: ignore[arg-type]
        out = out.transpose(1, 2).flatten(-2)  # (B, T, C)
        return self.proj(out), weights


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.dim)
        self.attn = SelfAttention(config)
        self.ln_mlp = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, config.mlp_ratio * config.dim),
            nn.GELU(),
            nn.Linear(config.mlp_ratio * config.dim, config.dim),
        )

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x`` ``(B, T, C)`` -> ``(B, T, C)`` and the attention weights or None."""
        attended, weights = self.attn(self.ln_attn(x), positions, return_weights)
        x = x + attended
        return x + self.mlp(self.ln_mlp(x)), weights


class TinyTransformer(nn.Module):
    """Token embedding, optional absolute position encoding, blocks, and a linear head.

    Example:
        >>> model = TinyTransformer(ModelConfig(vocab_size=10, position="rope"))
        >>> model(torch.zeros(2, 7, dtype=torch.long)).shape
        torch.Size([2, 7, 10])
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.learned_positions = (
            nn.Embedding(config.max_len, config.dim) if config.position == "learned" else None
        )
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_out = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab_size)

    def position_encoding(self, seq_len: int, device: torch.device) -> torch.Tensor | None:
        """The ``(T, C)`` table added to the embeddings, or None for NoPE and RoPE."""
        kind = self.config.position
        if kind in ("none", "rope"):
            return None
        if kind == "learned":
            assert self.learned_positions is not None
            if seq_len > self.config.max_len:
                raise ValueError(
                    f"a learned table has {self.config.max_len} rows; "
                    f"sequences of length {seq_len} have no encoding"
                )
            return self.learned_positions.weight[:seq_len]
        return _absolute_table(kind, seq_len, self.config.dim, device)

    def _run(
        self, tokens: torch.Tensor, positions: torch.Tensor | None, return_weights: bool
    ) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
            raise TypeError("tokens must be an integer tensor of shape (batch, seq)")
        if positions is not None:
            positions = positions.unsqueeze(-2)  # (T,) -> (1, T); (B, T) -> (B, 1, T)
        x = self.embed(tokens)  # (B, T, C)
        table = self.position_encoding(tokens.shape[1], tokens.device)
        if table is not None:
            x = x + table
        all_weights = []
        for block in self.blocks:
            x, weights = block(x, positions, return_weights)
            all_weights.append(weights)
        return self.head(self.ln_out(x)), all_weights  # (B, T, V)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits for every position.

        Args:
            tokens: token ids ``(B, T)``.
            positions: RoPE positions ``(T,)`` or ``(B, T)``; default
                ``arange(T)``. The absolute encodings ignore them.

        Returns:
            Logits ``(B, T, V)``.
        """
        return self._run(tokens, positions, return_weights=False)[0]

    def attention_maps(
        self, tokens: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``(B, T, V)`` and each layer's attention weights ``(B, H, T, T)``."""
        logits, weights = self._run(tokens, positions, return_weights=True)
        return logits, [w for w in weights if w is not None]
