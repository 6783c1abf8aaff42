"""A small transformer whose position encoding is one switch in its config.

Pre-LayerNorm blocks in the style of nanoGPT (A. Karpathy), with attention
from :func:`rope_lessons.toy.rotary_attention.attention`, so that every chapter trains the
same model and changes one field of :class:`ModelConfig`.

Shapes: ``B`` batch, ``T`` sequence length, ``C`` model width, ``H`` heads,
``D = C / H`` head dimension, ``V`` vocabulary size.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, NamedTuple, get_args

import torch
from torch import nn

from rope_lessons._checks import check_choice, check_positions, check_positive_int
from rope_lessons.rope.encodings import AbsoluteEncoding, absolute_encoding
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import Local, Placement, attention, check_placement

PositionKind = Literal["none", "learned", "rope"] | AbsoluteEncoding
POSITION_KINDS: tuple[PositionKind, ...] = ("none", "learned", *get_args(AbsoluteEncoding), "rope")


class QKV(NamedTuple):
    """One layer's queries, keys and values before any rotation, each ``(B, H, T, D)``."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


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
        rope: the RoPE spec of every rotating layer (frequencies, layout,
            attention factor), of dimension ``D``; with ``position="rope"``
            None means ``Rope(D)`` (RoFormer's base 10000, interleaved), and
            after construction the field always holds the spec. With any
            other position it must stay None.
        placement: where RoPE rotates (one of
            :data:`~rope_lessons.toy.rotary_attention.PLACEMENTS`; ``"qk"`` is RoFormer's).
        nope_layers: indices of layers that use no position encoding at all
            (e.g. every fourth layer, as in Llama 4).
        kv_heads: key-value heads ``H_kv`` (dividing ``n_heads``): grouped-query
            attention shares each among ``n_heads / H_kv`` query heads, and
            ``kv_heads=1`` is multi-query attention (MQA). None means
            ``n_heads`` (multi-head attention); after construction the field
            always holds the number.
        shared_kv: one projection serves as both key and value (``K = V``, the
            form MLA's cache takes once its up-projections are absorbed), so a
            decoder caches one vector of ``D`` numbers per key-value head. With
            ``placement="qk"`` the key is the vector turned at read time and
            the value the unturned vector; with ``"qkvo"`` both are the turned
            vector (VO-RoPE's one cached vector).
        learned_angles: train the frequencies: each rotating layer holds its own
            copy of the spec's ``theta`` ``(D/2,)`` as a parameter, starting at
            the spec's values (J. Su's suggestion for VO-RoPE; LRU trains its
            angles likewise). The spec still gives the layout and the
            attention factor.
        rope_local: restrict the attention of every rotating layer to a
            :class:`~rope_lessons.toy.rotary_attention.Local` window or chunk of keys (the
            NoPE layers of ``nope_layers`` stay global): Llama 4's chunked
            RoPE layers, or with every layer rotating, a sliding-window model.
        qk_norm: RMS-normalise each query and key (no weight) in the rotating
            layers, as Llama 4 does in its RoPE layers (``Llama4TextL2Norm``,
            eps 1e-6); a rotation keeps the norm, so before or after it is the same.
        nope_temperature: Llama 4's temperature tuning in the NoPE layers of
            ``nope_layers``: the query at position ``m`` is multiplied by
            ``1 + 0.1 log(1 + floor((m + 1) / nope_temperature))`` (Llama 4's
            ``floor_scale`` is 8192, its chunk size). None: no tuning.

    ``rope``, ``placement``, ``nope_layers`` and ``learned_angles`` only mean something with
    ``position="rope"``; setting any of them with another position encoding is
    refused rather than silently ignored.

    Example:
        >>> ModelConfig(vocab_size=10).rope  # D = 64 / 4
        Rope(16, base=10000, layout='interleaved', p=1, attention_factor=1)
        >>> ModelConfig(vocab_size=10, rope=Rope(16, base=500.0), placement="vo").placement
        'vo'
    """

    vocab_size: int
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    mlp_ratio: int = 4
    causal: bool = True
    position: PositionKind = "rope"
    max_len: int = 512
    rope: Rope | None = None
    placement: Placement = "qk"
    nope_layers: tuple[int, ...] = ()
    kv_heads: int | None = None
    shared_kv: bool = False
    learned_angles: bool = False
    rope_local: Local | None = None
    qk_norm: bool = False
    nope_temperature: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "mlp_ratio", "max_len"):
            check_positive_int(getattr(self, name), name)
        if self.dim % self.n_heads or (self.dim // self.n_heads) % 2:
            raise ValueError(
                f"dim / n_heads must be an even integer, got dim={self.dim}, n_heads={self.n_heads}"
            )
        check_choice(self.position, "position", POSITION_KINDS)
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.n_heads)
        check_positive_int(self.kv_heads, "kv_heads")
        if self.n_heads % self.key_value_heads:
            raise ValueError(
                f"kv_heads must divide n_heads (each key-value head serves a group of query "
                f"heads), got kv_heads={self.kv_heads}, n_heads={self.n_heads}"
            )
        for name in ("shared_kv", "learned_angles", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        check_placement(self.placement)
        if self.rope_local is not None and not isinstance(self.rope_local, Local):
            raise TypeError(
                f"rope_local must be a Local window or chunk (e.g. Local(64)), "
                f"got {self.rope_local!r}"
            )
        if self.nope_temperature is not None:
            check_positive_int(self.nope_temperature, "nope_temperature")
        if not isinstance(self.nope_layers, tuple) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.n_layers
            for i in self.nope_layers
        ):
            raise ValueError(
                f"nope_layers must be a tuple of layer indices in [0, {self.n_layers}), "
                f"got {self.nope_layers!r}"
            )
        if self.position != "rope":
            changed = [
                name
                for name, value, default in (
                    ("rope", self.rope, None),
                    ("placement", self.placement, "qk"),
                    ("nope_layers", self.nope_layers, ()),
                    ("learned_angles", self.learned_angles, False),
                    ("rope_local", self.rope_local, None),
                    ("qk_norm", self.qk_norm, False),
                    ("nope_temperature", self.nope_temperature, None),
                )
                if value != default
            ]
            if changed:
                raise ValueError(
                    f"{', '.join(changed)} only apply with position='rope', "
                    f"got position={self.position!r}"
                )
            return
        if self.rope is None:
            object.__setattr__(self, "rope", Rope(self.head_dim))
        elif not isinstance(self.rope, Rope):
            raise TypeError(
                f"rope must be a Rope spec (e.g. Rope({self.head_dim}, base=500.0)) or None, "
                f"got {self.rope!r}; where RoPE rotates is the field placement="
            )
        elif self.rope.dim != self.head_dim:
            raise ValueError(
                f"the Rope spec has dimension {self.rope.dim}, but the heads have "
                f"D = dim / n_heads = {self.head_dim}"
            )
        elif self.rope.partial and self.learned_angles:
            raise ValueError(
                "learned_angles trains one angle per pair of the head; this spec rotates "
                f"only {self.rope.rotary_dim} of {self.head_dim} features (partial rotary)"
            )

    @property
    def head_dim(self) -> int:
        """``D = dim / n_heads``."""
        return self.dim // self.n_heads

    @property
    def key_value_heads(self) -> int:
        """``H_kv``: :attr:`kv_heads`, which construction has set (an int)."""
        return self.n_heads if self.kv_heads is None else self.kv_heads

    @property
    def cached_vectors(self) -> int:
        """Vectors of ``D`` numbers a decoder caches per token and layer: a key and a
        value per key-value head, or one shared vector per head with :attr:`shared_kv`.
        (With ``shared_kv`` and ``placement="qk"`` the cached vector is the unturned
        one and the key is turned at read time.)"""
        return self.key_value_heads * (1 if self.shared_kv else 2)

    def layer_placement(self, layer: int) -> Placement:
        """Where RoPE rotates in layer ``layer``: :attr:`placement`, or ``"nope"`` if the
        layer has no positions."""
        if self.position != "rope" or layer in self.nope_layers:
            return "nope"
        return self.placement

    def build(self) -> TinyTransformer:
        """A freshly initialised :class:`TinyTransformer` of this configuration."""
        return TinyTransformer(self)

    def describe(self) -> dict[str, Any]:
        """Every field as JSON-ready values (the spec by
        :meth:`~rope_lessons.rope.spec.Rope.to_dict`)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["rope"] = None if self.rope is None else self.rope.to_dict()
        values["nope_layers"] = list(self.nope_layers)
        # Multi-head attention with separate keys and values is described as before
        # these fields existed, so that stored descriptions of such models still match.
        if values["kv_heads"] == self.n_heads and not self.shared_kv:
            del values["kv_heads"], values["shared_kv"]
        if not self.learned_angles:
            del values["learned_angles"]
        # Fields added later are described only when set, for the same reason.
        values["rope_local"] = None if self.rope_local is None else self.rope_local.to_dict()
        for name, default in (("rope_local", None), ("qk_norm", False), ("nope_temperature", None)):
            if values[name] == default:
                del values[name]
        return values


@lru_cache(maxsize=32)
def _absolute_table(
    kind: AbsoluteEncoding, seq_len: int, dim: int, device: torch.device
) -> torch.Tensor:
    """An absolute encoding table ``(T, C)`` on ``device``, built once per length."""
    return absolute_encoding(kind, seq_len, dim).to(device)


QK_NORM_EPS = 1e-6  # Llama 4's rms_norm_eps
LLAMA4_ATTN_SCALE = 0.1  # Llama 4's attn_scale


def rms_normalised(x: torch.Tensor) -> torch.Tensor:
    """``x`` ``(..., D)`` divided by its root mean square over the last axis (no weight)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + QK_NORM_EPS)


def llama4_temperature(positions: torch.Tensor, floor_scale: int) -> torch.Tensor:
    r"""Llama 4's query scale in its NoPE layers at each position ``m``:
    :math:`1 + 0.1 \log(1 + \lfloor (m + 1) / s \rfloor)` with floor scale ``s``.

    It is 1 for the first ``s - 1`` positions and grows like the logarithm of
    the number of chunks after that (the attention temperature of Nakanishi,
    arXiv:2501.19399, in steps of a chunk).

    Returns:
        float32 tensor of ``positions``' shape.
    """
    chunks = torch.floor((positions.to(torch.float32) + 1.0) / floor_scale)
    return 1.0 + LLAMA4_ATTN_SCALE * torch.log1p(chunks)


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
        self.placement = config.layer_placement(layer)
        # Rows: W_q (C), then W_k and W_v (H_kv * D each), or one shared W_kv (H_kv * D).
        self.kv_width = config.key_value_heads * config.head_dim
        self.qkv = nn.Linear(
            config.dim, config.dim + config.cached_vectors * config.head_dim, bias=False
        )
        self.proj = nn.Linear(config.dim, config.dim, bias=False)
        self.theta: nn.Parameter | None = None  # (D/2,): trained frequencies, if any
        if config.learned_angles and config.rope is not None and self.placement != "nope":
            self.theta = nn.Parameter(config.rope.theta.to(torch.float32).clone())

    @property
    def widths(self) -> tuple[int, ...]:
        """The column blocks of the ``qkv`` projection's output: queries ``C``, then keys and values
        ``H_kv * D`` each, or with ``shared_kv`` one shared block of ``H_kv * D``."""
        return (self.config.dim, *(self.kv_width,) * (1 if self.config.shared_kv else 2))

    def project(self, x: torch.Tensor) -> QKV:
        """``x`` ``(B, T, C)`` -> unrotated queries ``(B, H, T, D)``, keys and values
        ``(B, H_kv, T, D)`` (the same tensor twice with ``shared_kv``)."""
        cfg = self.config
        q, *kv = (
            t.unflatten(-1, (-1, cfg.head_dim)).transpose(1, 2)  # (B, heads, T, D)
            for t in self.qkv(x).split(self.widths, dim=-1)
        )
        return QKV(q, kv[0], kv[-1])  # kv holds a key and a value, or one shared vector

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
        q, k, v = qkv
        rotating = self.placement != "nope"
        if cfg.qk_norm and rotating:
            q, k = rms_normalised(q), rms_normalised(k)
        if cfg.nope_temperature is not None and not rotating:
            where = torch.arange(x.shape[1], device=x.device) if positions is None else positions
            q = q * llama4_temperature(where, cfg.nope_temperature).unsqueeze(-1).to(q.dtype)
        result = attention(
            q,
            k,
            v,
            placement=self.placement,
            rope=cfg.rope,
            causal=cfg.causal,
            positions=positions,
            return_weights=return_weights,
            theta=self.theta,
            local=cfg.rope_local if rotating else None,
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

    def _check_ids(self, tokens: torch.Tensor) -> None:
        """Refuse ids outside ``[0, V)``: with a clear error on the CPU, and on an
        accelerator with an asynchronous assertion (no host-device sync per step)."""
        vocab = self.config.vocab_size
        if not tokens.numel():
            return
        if tokens.device.type != "cpu":
            torch._assert_async(((tokens >= 0) & (tokens < vocab)).all())
            return
        low, high = (int(value) for value in torch.aminmax(tokens))
        if low < 0 or high >= vocab:
            raise ValueError(
                f"tokens must lie in [0, vocab_size={vocab}), got ids from {low} to {high}"
            )

    def _run(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor | None,
        return_weights: bool = False,
        keep_qkv: bool = False,
    ) -> tuple[torch.Tensor, list[LayerOutput]]:
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
            raise TypeError("tokens must be an integer tensor of shape (batch, seq)")
        self._check_ids(tokens)
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
