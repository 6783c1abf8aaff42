"""A small transformer whose position encoding is one switch in its config.

Pre-LayerNorm blocks in the style of nanoGPT (A. Karpathy), with attention
from :func:`rope_lessons.attention.attention`, so that every chapter trains the
same model and changes one field of :class:`ModelConfig`.

Shapes: ``B`` batch, ``T`` sequence length, ``C`` model width, ``H`` heads,
``D = C / H`` head dimension, ``V`` vocabulary size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, NamedTuple, get_args

import torch
from torch import nn

from rope_lessons._checks import (
    DEFAULT_BASE,
    DEFAULT_P,
    check_base,
    check_choice,
    check_fraction,
    check_layout,
    check_not_overridden,
    check_positions,
    check_positive_int,
    check_theta,
)
from rope_lessons._config_rope import config_rope
from rope_lessons.attention import Placement, attention, check_placement
from rope_lessons.encodings import AbsoluteEncoding, absolute_encoding
from rope_lessons.rope import Layout

PositionKind = Literal["none", "learned", "rope"] | AbsoluteEncoding
POSITION_KINDS: tuple[PositionKind, ...] = ("none", "learned", *get_args(AbsoluteEncoding), "rope")
ROTARY_FIELDS = ("rope", "rope_base", "rope_layout", "rope_p", "rope_theta", "nope_layers")


class QKV(NamedTuple):
    """One layer's queries, keys and values before any rotation, each ``(B, H, T, D)``."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


class RotaryArguments(NamedTuple):
    """The rotary settings of a config as the rotation functions take them."""

    base: float
    layout: Layout
    p: float
    theta: torch.Tensor | None


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
        rope_theta: per-pair frequencies ``(D/2,)`` for every layer, in the
            order of :func:`rope_lessons.rope.frequencies`; overrides
            ``rope_base`` and ``rope_p`` (a zero leaves its pair unrotated).
            A ``rope_p`` other than 1 beside it is refused, not ignored. A
            ``rope_base`` beside it is kept as a record of the ladder the
            frequencies were drawn from (stored sweeps describe runs so) and
            is not used: :meth:`rotary_arguments` passes the default.
        nope_layers: indices of layers that use no position encoding at all
            (e.g. every fourth layer, as in Llama 4).

    The rotary fields only mean something with ``position="rope"``; setting
    any of them to a non-default value with another position encoding is
    refused rather than silently ignored.
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
    rope_theta: tuple[float, ...] | None = None
    nope_layers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "mlp_ratio", "max_len"):
            check_positive_int(getattr(self, name), name)
        if self.dim % self.n_heads or (self.dim // self.n_heads) % 2:
            raise ValueError(
                f"dim / n_heads must be an even integer, got dim={self.dim}, n_heads={self.n_heads}"
            )
        check_choice(self.position, "position", POSITION_KINDS)
        check_placement(self.rope)
        check_base(self.rope_base)
        check_layout(self.rope_layout)
        check_fraction(self.rope_p, "rope_p")
        if self.rope_theta is not None:
            if not isinstance(self.rope_theta, tuple):
                raise TypeError(
                    f"rope_theta must be a tuple of floats, got {type(self.rope_theta).__name__}"
                )
            check_theta(torch.tensor(self.rope_theta, dtype=torch.float64), self.head_dim)
            check_not_overridden(
                DEFAULT_BASE, self.rope_p, self.rope_theta, ("rope_base", "rope_p", "rope_theta")
            )
        if not isinstance(self.nope_layers, tuple) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n_layers
            for i in self.nope_layers
        ):
            raise ValueError(
                f"nope_layers must be a tuple of layer indices in [0, {self.n_layers}), "
                f"got {self.nope_layers!r}"
            )
        if self.position != "rope":
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            changed = [name for name in ROTARY_FIELDS if getattr(self, name) != defaults[name]]
            if changed:
                raise ValueError(
                    f"{', '.join(changed)} only apply with position='rope', "
                    f"got position={self.position!r}"
                )

    @property
    def head_dim(self) -> int:
        """``D = dim / n_heads``."""
        return self.dim // self.n_heads

    def rotary_arguments(self) -> RotaryArguments:
        """``base``, ``layout``, ``p`` and ``theta`` for :func:`~rope_lessons.rope.apply_rope`
        and :func:`~rope_lessons.attention.attention`: with ``rope_theta``, the
        frequencies as a float64 tensor and the default base and p it overrides."""
        if self.rope_theta is None:
            return RotaryArguments(self.rope_base, self.rope_layout, self.rope_p, None)
        theta = torch.tensor(self.rope_theta, dtype=torch.float64)
        return RotaryArguments(DEFAULT_BASE, self.rope_layout, DEFAULT_P, theta)

    def placement(self, layer: int) -> Placement:
        """Where RoPE rotates in layer ``layer``: ``rope``, or ``"nope"`` if it has no positions."""
        if self.position != "rope" or layer in self.nope_layers:
            return "nope"
        return self.rope


@lru_cache(maxsize=32)
def _absolute_table(
    kind: AbsoluteEncoding, seq_len: int, dim: int, device: torch.device
) -> torch.Tensor:
    """An absolute encoding table ``(T, C)`` on ``device``, built once per length."""
    return absolute_encoding(kind, seq_len, dim).to(device)


class LayerOutput(NamedTuple):
    """What a block hands back: its output ``(B, T, C)``, and on request its
    attention weights ``(B, H, T, T)`` and its unrotated queries, keys and values."""

    x: torch.Tensor
    weights: torch.Tensor | None
    qkv: QKV | None


class SelfAttention(nn.Module):
    """Multi-head self-attention with the placement its config gives its layer."""

    def __init__(self, config: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.config = config
        self.placement = config.placement(layer)
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.proj = nn.Linear(config.dim, config.dim, bias=False)
        self.rotary = config.rotary_arguments()
        self.theta = self.rotary.theta

    def project(self, x: torch.Tensor) -> QKV:
        """``x`` ``(B, T, C)`` -> unrotated queries, keys and values, each ``(B, H, T, D)``."""
        cfg = self.config
        q, k, v = self.qkv(x).split(cfg.dim, dim=-1)  # (B, T, C) each
        return QKV(
            *(t.unflatten(-1, (cfg.n_heads, cfg.head_dim)).transpose(1, 2) for t in (q, k, v))
        )

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        return_weights: bool = False,
        keep_qkv: bool = False,
    ) -> LayerOutput:
        """``x`` ``(B, T, C)`` -> output ``(B, T, C)``, weights and unrotated q, k, v on request."""
        cfg = self.config
        qkv = self.project(x)  # (B, H, T, D) each
        result = attention(
            *qkv,
            placement=self.placement,
            rope=config_rope(cfg),
            causal=cfg.causal,
            positions=positions,
            return_weights=return_weights,
        )
        out, weights = result if isinstance(result, tuple) else (result, None)
        out = out.transpose(1, 2).flatten(-2)  # (B, T, C)
        return LayerOutput(self.proj(out), weights, qkv if keep_qkv else None)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, config: ModelConfig, layer: int = 0) -> None:
        super().__init__()
        self.ln_attn = nn.LayerNorm(config.dim)
        self.attn = SelfAttention(config, layer)
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
        keep_qkv: bool = False,
    ) -> LayerOutput:
        """``x`` ``(B, T, C)`` -> ``(B, T, C)``, with the attention's extras on request."""
        attended: LayerOutput = self.attn(self.ln_attn(x), positions, return_weights, keep_qkv)
        x = x + attended.x
        return attended._replace(x=x + self.mlp(self.ln_mlp(x)))


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
        self.blocks = nn.ModuleList(Block(config, layer) for layer in range(config.n_layers))
        self.ln_out = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab_size)

    def position_encoding(self, seq_len: int, device: torch.device) -> torch.Tensor | None:
        """The ``(T, C)`` table added to the embeddings, or None for NoPE and RoPE."""
        kind = self.config.position
        if kind in ("none", "rope"):
            return None
        if kind == "learned":
            if self.learned_positions is None or seq_len > self.config.max_len:
                raise ValueError(
                    f"a learned table has {self.config.max_len} rows; "
                    f"sequences of length {seq_len} have no encoding"
                )
            return self.learned_positions.weight[:seq_len]
        return _absolute_table(kind, seq_len, self.config.dim, device)

    def _run(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor | None,
        return_weights: bool = False,
        keep_qkv: bool = False,
    ) -> tuple[torch.Tensor, list[LayerOutput]]:
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
            raise TypeError("tokens must be an integer tensor of shape (batch, seq)")
        if tokens.numel() and (
            int(tokens.min()) < 0 or int(tokens.max()) >= self.config.vocab_size
        ):
            raise ValueError(
                f"tokens must lie in [0, vocab_size={self.config.vocab_size}), "
                f"got ids from {int(tokens.min())} to {int(tokens.max())}"
            )
        if positions is not None:
            if positions.ndim not in (1, 2):
                raise ValueError(
                    "positions must have shape (seq,) or (batch, seq), "
                    f"got {tuple(positions.shape)}"
                )
            positions = check_positions(
                positions, tokens.shape if positions.ndim == 2 else tokens.shape[1:]
            )
            positions = positions.unsqueeze(-2)  # (T,) -> (1, T); (B, T) -> (B, 1, T)
        x = self.embed(tokens)  # (B, T, C)
        table = self.position_encoding(tokens.shape[1], tokens.device)
        if table is not None:
            x = x + table
        layers = []
        for block in self.blocks:
            layer: LayerOutput = block(x, positions, return_weights, keep_qkv)
            layers.append(layer)
            x = layer.x
        return self.head(self.ln_out(x)), layers  # (B, T, V)

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Logits for every position.

        Args:
            tokens: token ids ``(B, T)``.
            positions: RoPE positions ``(T,)`` or ``(B, T)``; default
                ``arange(T)``. The absolute encodings ignore them.

        Returns:
            Logits ``(B, T, V)``.
        """
        return self._run(tokens, positions)[0]

    def attention_maps(
        self, tokens: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits ``(B, T, V)`` and each layer's attention weights ``(B, H, T, T)``."""
        logits, layers = self._run(tokens, positions, return_weights=True)
        return logits, [layer.weights for layer in layers if layer.weights is not None]

    def layer_qkv(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> list[QKV]:
        """Each layer's queries, keys and values before rotation, each ``(B, H, T, D)``.

        They come from the same forward pass as the logits, so rotating them
        with the layer's placement and scoring them gives back its attention.
        """
        _, layers = self._run(tokens, positions, keep_qkv=True)
        return [layer.qkv for layer in layers if layer.qkv is not None]
