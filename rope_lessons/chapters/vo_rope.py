r"""VO-RoPE (chapter 6): shared keys and values, cache sizes, readings, and rank agreement.

Three jobs, each small, and the published ranking they are read against:

* **Shared keys and values.** In a multi-query attention whose keys and values
  are the same cached vector :math:`c_n` (the inference form of MLA), a
  placement keeps the sharing only if the key stream and the value stream that
  enter softmax are still one tensor. :func:`key_and_value_streams` returns the
  two streams for any placement, :func:`shift_change` measures whether the
  output depends on absolute positions, and :func:`decode_with_one_cached_vector`
  decodes token by token from a cache that holds the single vector
  :math:`R_n c_n` per token, which is exactly ``qkvo`` attention on
  ``(q, c, c)``.
* **Cache arithmetic.** :func:`cache_bytes_per_token` counts the bytes a
  decoder stores per token.
* **What a trained model reads.** :func:`reading_stats`, the ``analyse``
  function of the chapter's stored sweeps, measures on held-out text how much
  attention stays on the diagonal, how far it reaches, and how much the
  value rotation turns what each query reads (the readers' questions under
  Su's post); :func:`key_position_sensitivity` measures how far each
  layer's attention moves when the keys' positions are permuted (where
  position reaches the scores; :func:`key_position_stats` stores it);
  :func:`trained_angles` stores the frequencies a model ends with, and
  :func:`stored_angles` reads them back.
* **Su's ranking.** :data:`SU_2025_LOSSES` and :data:`SU_2025_TIERS`, the
  nine placements as Su ranked them (kexue.fm/archives/10862); the toy
  ranking is set beside them with :mod:`rope_lessons.evidence.ranking`.

Shapes: ``B`` batch, ``H`` heads, ``T`` sequence length, ``D`` head dimension.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rope_lessons._checks import check_positive_int
from rope_lessons.chapters.spectrum import pair_dims
from rope_lessons.evidence.runs import Run, held_out
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import Block, TinyTransformer
from rope_lessons.toy.rotary_attention import Placement, attention, rotate_inputs, rotate_output


def _shared_heads(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Check ``q`` and ``c``; return ``c`` viewed with the heads of ``q`` (no copy)."""
    for name, t in (("q", q), ("c", c)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != 4 or not t.is_floating_point():
            raise ValueError(
                f"{name} must be a floating tensor (batch, heads, seq, head_dim), "
                f"got {t.dtype} {tuple(t.shape)}"
            )
    if q.shape[-1] != c.shape[-1] or q.shape[-2] != c.shape[-2] or q.shape[0] != c.shape[0]:
        raise ValueError(
            "q and c must agree in (batch, seq, head_dim), "
            f"got {tuple(q.shape)} and {tuple(c.shape)}"
        )
    if c.shape[1] not in (1, q.shape[1]):
        raise ValueError(f"c must have 1 head or as many as q ({q.shape[1]}), got {c.shape[1]}")
    return c.expand(q.shape)


def key_and_value_streams(
    q: torch.Tensor,
    c: torch.Tensor,
    *,
    placement: Placement,
    rope: Rope | None = None,
    positions: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and the values that enter softmax when keys and values share ``c``.

    Args:
        q: queries ``(B, H, T, D)``.
        c: the one vector per token that serves as key and as value,
            ``(B, H_c, T, D)`` with ``H_c`` 1 or ``H`` (multi-query or not).
        placement: one of :data:`~rope_lessons.toy.rotary_attention.PLACEMENTS`.
        rope, positions: as in :func:`~rope_lessons.toy.rotary_attention.attention`.

    Returns:
        ``(keys, values)``, each ``(B, H, T, D)``. A decoder can cache one
        vector per token only if they are equal.
    """
    c = _shared_heads(q, c)
    _, keys, values = rotate_inputs(q, c, c, placement=placement, rope=rope, positions=positions)
    return keys, values


def shift_change(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    placement: Placement,
    shift: int,
    rope: Rope | None = None,
) -> float:
    """Largest change of the attention output when every position moves by ``shift``.

    Zero (to rounding) for a relative placement; clearly nonzero for an
    absolute one. Inputs ``(B, H, T, D)``; positions ``0..T-1`` against
    ``shift..shift+T-1``; ``rope`` as in :func:`~rope_lessons.toy.rotary_attention.attention`.
    """
    if isinstance(shift, bool) or not isinstance(shift, int):
        raise TypeError(f"shift must be an int, got {type(shift).__name__}")
    seq_len = q.shape[-2]
    plain = attention(q, k, v, placement=placement, rope=rope)
    moved = attention(
        q, k, v, placement=placement, rope=rope, positions=torch.arange(seq_len) + shift
    )
    return float((moved - plain).abs().max())


def decode_with_one_cached_vector(
    q: torch.Tensor,
    c: torch.Tensor,
    *,
    rope: Rope | None = None,
) -> torch.Tensor:
    r"""Causal decoding, one token at a time, from a cache of :math:`R_n c_n` only.

    At step ``m`` the decoder appends :math:`R_m c_m` to the cache, scores the
    rotated query :math:`R_m q_m` against every cached vector, averages the
    *same* cached vectors with the softmax weights and turns the result back by
    :math:`R_m^\top`. The rotations are
    :func:`~rope_lessons.toy.rotary_attention.rotate_inputs` and
    :func:`~rope_lessons.toy.rotary_attention.rotate_output`; the kernel for one query is
    PyTorch's fused softmax attention, as in
    :func:`~rope_lessons.toy.rotary_attention.attention`.

    Args:
        q: queries ``(B, H, T, D)``.
        c: shared key-value vectors ``(B, H_c, T, D)``, ``H_c`` 1 or ``H``.
        rope: the spec, ``dim == D``; default ``Rope(D)``. An attention factor
            other than 1 is refused (it would scale the cache).

    Returns:
        Outputs ``(B, H, T, D)``, equal to ``attention(q, c, c, placement="qkvo", rope=rope)``.
    """
    c = _shared_heads(q, c)
    if rope is not None and rope.attention_factor != 1.0:
        raise ValueError(
            f"rope.attention_factor = {rope.attention_factor:g}: one cached vector serves "
            "as key and value, so the factor would scale the values too; use a spec with 1"
        )
    rotated_q, cache, _ = rotate_inputs(
        q, c, c, placement="qk", rope=rope
    )  # R_m q_m and R_n c_n, (B, H, T, D): the cache holds R_n c_n only
    outputs = []
    for m in range(q.shape[-2]):
        stored = cache[..., : m + 1, :]  # what the cache holds after step m
        read = F.scaled_dot_product_attention(rotated_q[..., m : m + 1, :], stored, stored)
        outputs.append(
            rotate_output(
                read,  # (B, H, 1, D), turned back by R_m^T
                placement="qkvo",
                rope=rope,
                positions=torch.tensor([m]),
            )
        )
    return torch.cat(outputs, dim=-2)


WITHOUT_VALUE_TURN: dict[str, Placement] = {"v": "nope", "vo": "nope", "qkv": "qk", "qkvo": "qk"}
"""Each placement that turns values, and the same placement without the value
and output turns (identical attention weights, unturned values)."""

READ_DISTANCES = (1, 4, 16, 63)
"""Distances at which :func:`reading_stats` reports the cosine of a value with
itself turned by :math:`R_{-r}`."""

READ_BATCH = 16


def _mean_cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(F.cosine_similarity(a, b, dim=-1, eps=1e-12).mean())


@torch.no_grad()
def reading_stats(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    r"""What the attention of a trained model reads, on held-out data at the training length.

    Averaged over layers, heads, sequences and query positions of
    ``READ_BATCH`` validation sequences:

    * ``diagonal_weight``: the weight :math:`a_{mm}` of a token on itself;
    * ``mean_distance``: :math:`\sum_n a_{mn}(m - n)`, how far back it reads.

    For a RoPE model whose placement turns values (``v``, ``vo``, ``qkv``,
    ``qkvo``), also (a model without RoPE, e.g. absolute positions, gets the
    first two only):

    * ``turn_cosine``: the cosine between the output and the output of the
      same weights on unturned values (:data:`WITHOUT_VALUE_TURN`), 1 when the
      rotation changes nothing; ``turn_cosine_fast`` and ``turn_cosine_slow``
      the same on the fastest and the slowest pair only;
    * ``self_cosine_r``: for each ``r`` in :data:`READ_DISTANCES`, the mean
      cosine between a value and the same value turned by :math:`R_{-r}`
      (how a value read from ``r`` tokens back compares with itself).

    Args:
        model: the trained model.
        run: its :class:`~rope_lessons.evidence.runs.Run` (data and training length).
        device: where the model is.
    """
    tokens, _ = held_out(run.data, run.train_len, READ_BATCH, device)()
    _, weights = model.attention_maps(tokens)
    stacked = torch.stack(weights)  # (L, B, H, T, T)
    seq_len = stacked.shape[-1]
    back = (torch.arange(seq_len)[:, None] - torch.arange(seq_len)[None, :]).clamp(min=0)
    stats = {
        "diagonal_weight": float(stacked.diagonal(dim1=-2, dim2=-1).mean()),
        "mean_distance": float((stacked * back.to(stacked)).sum(-1).mean()),
    }
    cfg = model.config
    rope = cfg.rope
    if rope is None:  # nothing turns: no value-turn statistics
        return stats
    dims = pair_dims(rope)  # (D/2, 2)
    fast, slow = dims[0].tolist(), dims[-1].tolist()
    cosines: dict[str, list[float]] = {}
    for layer, (q, k, v) in enumerate(model.layer_qkv(tokens)):
        placement = cfg.layer_placement(layer)
        if placement not in WITHOUT_VALUE_TURN:
            continue
        turned, plain = (
            attention(q, k, v, placement=each, rope=rope)
            for each in (placement, WITHOUT_VALUE_TURN[placement])
        )
        self_scores = rope.score_at_distance(v, v, torch.tensor(READ_DISTANCES))  # (B, H, T, R)
        norms = v.double().square().sum(-1, keepdim=True).clamp(min=1e-12)
        found = {
            "turn_cosine": _mean_cosine(turned, plain),
            "turn_cosine_fast": _mean_cosine(turned[..., fast], plain[..., fast]),
            "turn_cosine_slow": _mean_cosine(turned[..., slow], plain[..., slow]),
        }
        for r, value in zip(READ_DISTANCES, (self_scores / norms).mean((0, 1, 2)), strict=True):
            found[f"self_cosine_{r}"] = float(value)
        for key, value in found.items():
            cosines.setdefault(key, []).append(value)
    stats.update({key: sum(values) / len(values) for key, values in cosines.items()})
    return stats


def key_position_sensitivity(
    model: TinyTransformer, tokens: torch.Tensor, permutation: torch.Tensor
) -> list[float]:
    r"""How much each layer's attention weights move when the keys' positions are permuted.

    Two forward passes: one at the true positions ``0..T-1`` and one with every
    rotation at ``permutation`` (the causal mask stays by index, so every query
    still sees the same keys). Each layer's weights are then scored with the
    queries of the first pass, rotated at their true positions, against the keys
    of the second pass, rotated (where the placement turns keys) at the permuted
    positions: the keys carry permuted positions, whether their position enters
    by the key rotation or through what earlier layers wrote into the token.
    The number is the total-variation distance
    :math:`\tfrac12 \sum_n |a_{mn} - a'_{mn}|` between the two softmax rows,
    averaged over sequences, heads and query rows (the first row, with one key,
    included: it is 0 by construction).

    With ``q``, ``v`` or ``o`` alone (and NoPE) the first layer's logits
    :math:`(R_m q_m)^\top k_n` do not involve the key's position, so its number is
    exactly 0; with ``k`` in the placement it is positive for any permutation that
    moves a key. The identity permutation gives 0 in every layer.

    Args:
        model: a RoPE or NoPE model without absolute encodings, QK-norm, NoPE
            temperature or local windows (whose positions enter elsewhere).
        tokens: ``(B, T)`` token ids.
        permutation: ``(B, T)`` or ``(T,)``, a permutation of ``0..T-1`` (per sequence).

    Returns:
        One number per layer, in ``[0, 1]``.
    """
    cfg = model.config
    if cfg.position not in ("none", "rope") or cfg.qk_norm or cfg.nope_temperature is not None:
        raise ValueError(
            "key_position_sensitivity needs positions that enter by rotation only "
            f"(got position={cfg.position!r}, qk_norm={cfg.qk_norm}, "
            f"nope_temperature={cfg.nope_temperature})"
        )
    if cfg.rope_local is not None:
        raise ValueError("key_position_sensitivity does not handle local windows (rope_local)")
    seq_len = tokens.shape[-1]
    permutation = permutation.to(tokens.device).expand(tokens.shape)
    if not bool((permutation.sort(-1).values == torch.arange(seq_len, device=tokens.device)).all()):
        raise ValueError("permutation must hold every position 0..T-1 once in each row")
    true_pass = model.layer_qkv(tokens)
    permuted_pass = model.layer_qkv(tokens, permutation)
    below = torch.ones(seq_len, seq_len, dtype=torch.bool, device=tokens.device).tril()
    here = torch.arange(seq_len, device=tokens.device)
    distances = []
    for layer, (block, (q, k, v), (_, moved_k, moved_v)) in enumerate(
        zip(model.blocks, true_pass, permuted_pass, strict=True)
    ):
        if not isinstance(block, Block):
            raise TypeError(f"layer {layer} is not a Block")
        weights, moved = (
            attention(
                q,
                keys,
                values,
                placement=block.attn.placement,
                rope=cfg.rope,
                causal=False,
                attn_mask=below,
                q_positions=here,
                k_positions=where,
                return_weights=True,
                theta=block.attn.theta,
            )[1]  # (B, H, T, T)
            for keys, values, where in ((k, v, here), (moved_k, moved_v, permutation))
        )
        distances.append(float(0.5 * (moved - weights).abs().sum(-1).mean()))
    return distances


KEY_PERMUTATION_SEED = 0


@torch.no_grad()
def key_position_stats(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """:func:`key_position_sensitivity` on ``READ_BATCH`` held-out sequences at the training
    length, one random permutation per sequence (seeded by :data:`KEY_PERMUTATION_SEED`),
    as a sweep's ``analyse`` stores it: keys ``key_tv/<layer>`` (layer 0 is the first)."""
    tokens, _ = held_out(run.data, run.train_len, READ_BATCH, device)()
    generator = torch.Generator().manual_seed(KEY_PERMUTATION_SEED)
    permutation = torch.stack(
        [torch.randperm(tokens.shape[1], generator=generator) for _ in range(tokens.shape[0])]
    ).to(device)  # (B, T)
    distances = key_position_sensitivity(model, tokens, permutation)
    return {f"key_tv/{layer}": value for layer, value in enumerate(distances)}


def cache_bytes_per_token(
    *, n_layers: int, vectors_per_layer: int, vector_dim: int, bytes_per_element: int
) -> int:
    """Bytes a decoder caches for one token: layers x vectors x their size x element size.

    Example (Llama-2-7B-like multi-head attention in bf16: 32 layers, a key and
    a value for each of 32 heads of dimension 128):

        >>> cache_bytes_per_token(
        ...     n_layers=32, vectors_per_layer=64, vector_dim=128, bytes_per_element=2
        ... )
        524288
    """
    for name, value in (
        ("n_layers", n_layers),
        ("vectors_per_layer", vectors_per_layer),
        ("vector_dim", vector_dim),
        ("bytes_per_element", bytes_per_element),
    ):
        check_positive_int(value, name)
    return n_layers * vectors_per_layer * vector_dim * bytes_per_element


SU_2025_LOSSES: dict[str, float] = {
    "qk": 2.712,
    "qkvo": 2.719,
    "k": 2.769,
    "vo": 2.770,
    "qkv": 2.783,
    "nope": 2.795,
    "o": 2.841,
    "q": 2.851,
    "v": 2.856,
}
"""The loss of each placement on Su's ~1B LLaMA-like model
(kexue.fm/archives/10862, 2025; his table says only "loss", not which split);
keys are the placement names of :data:`~rope_lessons.toy.rotary_attention.PLACEMENTS`."""

SU_2025_TIERS: dict[str, int] = {
    "qk": 1,
    "qkvo": 1,
    "k": 2,
    "vo": 2,
    "qkv": 3,
    "nope": 4,
    "o": 5,
    "q": 5,
    "v": 5,
}
"""Su's own rough ordering of the same table, as tiers (1 best): QK ~ QKVO >
K ~ VO > QKV > NoPE > Q/V/O (kexue.fm/archives/10862). Placements in one tier
are the ones he calls about equal."""


def trained_angles(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Each rotating layer's frequencies after training, as a sweep's ``analyse`` stores them.

    Keys ``theta/<layer>/<pair>``: the trained ``theta`` of a model with
    ``learned_angles``, the spec's fixed ladder otherwise (layers that rotate
    nothing are left out). :func:`stored_angles` reads them back.
    """
    del run, device  # the weights alone answer
    angles = {}
    for layer, block in enumerate(model.blocks):
        if not isinstance(block, Block) or block.attn.placement == "nope":
            continue
        theta = block.attn.theta
        rope = model.config.rope
        if theta is not None:
            values = theta.detach().cpu()  # (D/2,)
        elif rope is not None:
            values = rope.theta
        else:
            continue
        for pair, value in enumerate(values.tolist()):
            angles[f"theta/{layer}/{pair}"] = float(value)
    return angles


def stored_angles(extra: dict[str, float]) -> torch.Tensor:
    """:func:`trained_angles`' numbers back as float64 ``(layers, D/2)``."""
    keys = [key.split("/") for key in extra if key.startswith("theta/")]
    if not keys:
        raise ValueError("no stored angles (keys theta/<layer>/<pair>) in these numbers")
    layers = sorted({int(layer) for _, layer, _ in keys})
    pairs = max(int(pair) for *_, pair in keys) + 1
    return torch.tensor(
        [[extra[f"theta/{layer}/{pair}"] for pair in range(pairs)] for layer in layers],
        dtype=torch.float64,
    )
