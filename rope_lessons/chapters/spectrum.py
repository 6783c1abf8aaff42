r"""What each RoPE frequency does: wavelengths, per-pair norms, truncated spectra, ablations.

Chapter 5 asks which of the :math:`d/2` rotary pairs a model uses, and for
what (Barbero et al., "Round and Round We Go! What makes Rotary Positional
Encodings useful?", ICLR 2025, arXiv:2410.06205). This module holds the
measurements and the frequency tables that the chapter compares:

* :func:`~.wavelengths` and :func:`~.turns`: how far each pair turns;
  :func:`turn_counts`: how many kept pairs of a spec turn fully within a
  context, how many only partly, how many are stopped;
* :func:`pair_norms`: the norm of each pair of a query or key, pair ``k`` as in
  :func:`rope_lessons.rope.ladder.frequencies` (pair 0 turns fastest);
* :func:`prope_theta` (p-RoPE: keep the highest frequencies, stop the lowest)
  and :func:`partial_rotary_theta` (GPT-NeoX's ``rotary_pct``: a ladder
  recomputed over the rotated dimensions), both as per-pair frequency tensors;
* :func:`ablate_pairs` (the same pairs everywhere) and :func:`ablate_pair_mask`
  (a set per head): a copy of a trained model whose queries and keys lose the
  chosen pairs, for inference-time ablations;
* :func:`pair_energy_shares`: each pair's share of a head's mean squared
  query or key norm; :func:`norm_matched_pairs`: the control pairs of an
  ablation that hold as much of it as the ablated ones;
* :func:`offset_attention`: how much attention goes to the key ``r`` back
  (``r = 0``: diagonal heads, ``r = 1``: previous-token heads);
* :func:`spread_vector`, :func:`diagonal_head`, :func:`previous_token_head`:
  the hand-built positional heads of Barbero et al.'s Theorem 5.3.

Shapes: ``...`` any leading dimensions, ``T`` sequence length, ``d`` head
dimension (even), ``d/2`` rotary pairs; ``(B, H, T, d)`` for attention inputs.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rope_lessons._checks import (
    check_base,
    check_even_dim,
    check_fraction,
    check_positive_int,
    check_positive_number,
)
from rope_lessons.rope.kernels import split_pairs
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import QKV, Block, TinyTransformer


@dataclass(frozen=True)
class TurnCounts:
    r"""How the pairs of a frequency vector turn over a context (see :func:`turn_counts`).

    Attributes:
        full: kept pairs (:math:`\theta_k > 0`) whose angle over the context's
            largest distance, :math:`(T-1)\theta_k`, reaches :math:`2\pi`: every
            angle they can ever show was seen within the context.
        partial: kept pairs that turn by less than :math:`2\pi`: longer
            contexts show them angles the context never did.
        stopped: pairs with :math:`\theta_k = 0` (p-RoPE's and partial
            rotary's unrotated pairs).
        slowest_angle: :math:`(T-1)\theta` of the slowest kept pair, in
            radians (0 when every pair is stopped).
    """

    full: int
    partial: int
    stopped: int
    slowest_angle: float

    @property
    def kept(self) -> int:
        """Pairs that rotate at all: ``full + partial``."""
        return self.full + self.partial


def turn_counts(rope: Rope | torch.Tensor | Sequence[float], context: int) -> TurnCounts:
    r"""Count the kept pairs that turn fully within ``context`` tokens, those that turn
    only partly, and the stopped ones.

    Within a context of :math:`T` tokens the largest query-key distance is
    :math:`T-1`, and pair ``k`` turns by at most :math:`(T-1)\theta_k`. A pair
    whose angle reaches :math:`2\pi` has shown every angle in training; one that
    stays below meets angles it never saw as soon as distances exceed the
    context (chapter 8's reading of why RoPE fails past its trained length).
    :func:`~rope_lessons.rope.ladder.turns` gives the same split pair by pair for a plain ladder
    (``turns(d, T - 1, base) >= 1``).

    Args:
        rope: a :class:`~rope_lessons.rope.spec.Rope` spec, or its per-pair
            frequencies ``(d/2,)`` (a tensor or a sequence of floats, finite and
            >= 0, e.g. :func:`prope_theta` or :func:`partial_rotary_theta`).
        context: the number of tokens :math:`T >= 1` (e.g. the training length).

    Returns:
        A :class:`TurnCounts`; ``full + partial + stopped == d/2``.

    Example:
        >>> turn_counts(Rope(64, base=100.0, p=0.75), 64)
        TurnCounts(full=17, partial=7, stopped=8, slowest_angle=2.30...)
    """
    spec = rope if isinstance(rope, Rope) else Rope.from_theta(rope)
    context = check_positive_int(context, "context")
    theta = spec.theta  # float64 (d/2,)
    angles = (context - 1) * theta
    kept = theta > 0
    full = kept & (angles >= 2.0 * math.pi)
    return TurnCounts(
        full=int(full.sum()),
        partial=int((kept & ~full).sum()),
        stopped=int((~kept).sum()),
        slowest_angle=float(angles[kept].min()) if bool(kept.any()) else 0.0,
    )


def pair_dims(rope: Rope) -> torch.Tensor:
    """The two feature indices of every rotary pair of ``rope``, pair ``k`` turning at ``theta_k``.

    Returns:
        Long tensor ``(d/2, 2)``: rows ``(2k, 2k+1)`` in the interleaved
        layout, ``(k, k + d/2)`` in the half layout.
    """
    if not isinstance(rope, Rope):
        raise TypeError(f"rope must be a Rope spec, got {type(rope).__name__}")
    rope.check_dim(rope.dim, "its dimension")  # a partial-rotary spec has no pairs in some
    coordinates = torch.arange(rope.dim)
    return torch.stack(split_pairs(coordinates, rope.layout), dim=-1)  # (d/2, 2)


def pair_columns(drop: torch.Tensor, rope: Rope) -> torch.Tensor:
    """The features of a projection's output ``(..., H * D)`` that hold the chosen pairs.

    Args:
        drop: bool ``(H, P)``: ``True`` where pair ``k`` of head ``h`` is chosen.
        rope: the spec whose layout says where each pair's two features sit.

    Returns:
        long tensor ``(2n,)`` for ``n`` chosen (head, pair) places.
    """
    head, pair = drop.nonzero(as_tuple=True)  # (n,), (n,)
    return (head[:, None] * rope.dim + pair_dims(rope)[pair]).flatten()


def pair_norms(x: torch.Tensor, rope: Rope | None = None) -> torch.Tensor:
    r"""The Euclidean norm of each rotary pair of ``x``: :math:`\lVert x^{(k)}\rVert`.

    RoPE turns each pair without changing its norm, so these norms are the
    same before and after rotation, and their squares sum to
    :math:`\lVert x\rVert^2`.

    Args:
        x: floating tensor ``(..., d)``, ``d`` even.
        rope: the spec whose layout says how the pairs sit in ``x``; default
            ``Rope(d)`` (interleaved).

    Returns:
        Tensor ``(..., d/2)`` in the dtype of ``x``; entry ``k`` belongs to
        frequency :math:`\theta_k` (entry 0: the fastest pair).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must have a floating dtype, got {x.dtype}")
    if x.ndim < 1:
        raise ValueError("x must have at least one dimension (the features)")
    dim = check_even_dim(x.shape[-1], "the last dimension of x")
    rope = Rope(dim) if rope is None else rope
    dims = pair_dims(rope)  # refuses anything but a spec
    rope.check_dim(dim, "the last dimension of x")
    norms: torch.Tensor = torch.linalg.vector_norm(x[..., dims.to(x.device)], dim=-1)
    return norms  # (..., d/2)


def prope_theta(dim: int, p: float, base: float = 10000.0) -> torch.Tensor:
    """p-RoPE's frequencies: the first ``floor(p d/2)`` of RoPE's, the rest 0.

    Barbero et al. keep the fraction ``p`` of the *highest* frequencies and
    leave the lowest pairs unrotated; ``p = 0`` is NoPE, ``p = 1`` is RoPE.
    This is :func:`rope_lessons.rope.ladder.frequencies` with ``p``, named here
    beside :func:`partial_rotary_theta` to compare the two.

    Returns:
        float64 tensor ``(d/2,)``.
    """
    return frequencies(dim, base, p=p)


def partial_rotary_theta(dim: int, fraction: float, base: float = 10000.0) -> torch.Tensor:
    r"""Conventional partial rotary (GPT-NeoX ``rotary_pct``) as per-pair frequencies.

    GPT-NeoX and Hugging Face rotate the first ``r = int(d * fraction)``
    dimensions of each head (half-split *within* those ``r``: pairs
    ``(i, i + r/2)``) with the ladder recomputed over ``r``,
    :math:`\text{base}^{-2i/r}` for ``i < r/2``, and pass the other
    ``d - r`` dimensions through. Up to a fixed permutation of the head's
    dimensions, which the projections absorb, that is RoPE with these
    frequencies in our pair order: the ladder on the first ``r/2`` pairs and 0
    on the rest. The ladder still runs from 1 down to
    :math:`\text{base}^{-(r-2)/r}`, so unlike p-RoPE it keeps the lowest
    frequencies and thins out the ones in between.

    Args:
        dim: head dimension ``d``.
        fraction: ``rotary_pct`` (``partial_rotary_factor``); ``int(d *
            fraction)`` must be even.
        base: the base of the ladder (``rotary_emb_base``, ``rope_theta``).

    Returns:
        float64 tensor ``(d/2,)``.
    """
    dim = check_even_dim(dim)
    fraction = check_fraction(fraction, "fraction")
    base = check_base(base)
    rotary = int(dim * fraction)
    if rotary % 2:
        raise ValueError(
            f"int(dim * fraction) = {rotary} rotated dimensions is odd; RoPE rotates pairs"
        )
    theta = torch.zeros(dim // 2, dtype=torch.float64)
    if rotary:
        theta[: rotary // 2] = frequencies(rotary, base)  # the ladder over r dimensions
    return theta


def _check_indices(values: Sequence[int] | None, name: str, bound: int) -> list[int]:
    """``values`` as a sorted list of distinct ints in ``[0, bound)``; None means all."""
    if values is None:
        return list(range(bound))
    chosen = list(values)
    for v in chosen:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must hold ints, got {type(v).__name__}")
        if not 0 <= v < bound:
            raise ValueError(f"{name} must lie in [0, {bound}), got {v}")
    return sorted(set(chosen))


def ablate_pairs(
    model: TinyTransformer,
    pairs: Sequence[int],
    *,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
) -> TinyTransformer:
    r"""A copy of ``model`` whose queries and keys have the given pairs set to zero.

    The rows of :math:`W_q` and :math:`W_k` that produce pair ``k`` are zeroed,
    so that pair contributes nothing to any attention score: the score is the
    sum over pairs of :math:`\langle R q^{(k)}, R k^{(k)}\rangle`, and the
    other pairs are untouched. Values, outputs and MLPs are unchanged. This
    removes what a frequency carries; it is different from stopping its
    rotation (frequency 0), which keeps the pair but drops its position.
    Models with grouped or shared keys and values, or with ``qk_norm``, are
    refused (see :func:`ablate_pair_mask`).

    Args:
        model: a trained model; it is not modified.
        pairs: pair indices ``k`` (0: the fastest pair), each in ``[0, D/2)``.
        layers, heads: where to ablate; None means every layer, every head.

    Returns:
        The ablated copy, in evaluation mode.
    """
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    cfg = model.config
    drop = torch.zeros(cfg.n_layers, cfg.n_heads, cfg.head_dim // 2, dtype=torch.bool)
    chosen_layers = torch.tensor(_check_indices(layers, "layers", cfg.n_layers))
    chosen_heads = torch.tensor(_check_indices(heads, "heads", cfg.n_heads))
    chosen_pairs = torch.tensor(_check_indices(pairs, "pairs", cfg.head_dim // 2))
    drop[chosen_layers[:, None, None], chosen_heads[None, :, None], chosen_pairs] = True
    return ablate_pair_mask(model, drop)


def ablate_pair_mask(model: TinyTransformer, drop: torch.Tensor) -> TinyTransformer:
    """:func:`ablate_pairs` with its own set of pairs for every layer and head.

    Only models with one key head per query head and keys apart from values
    (``kv_heads == n_heads``, ``shared_kv=False``) and without ``qk_norm`` are
    accepted. With fewer key heads, or one projection for keys and values, the
    rows of the key projection are not one head's per query head (zeroing them
    would change the values, or other heads' keys); with ``qk_norm`` the
    queries and keys are normalised after the projection, which scales the
    pairs left up to make good the norm the removed ones held.

    Args:
        model: a trained model; it is not modified.
        drop: bool tensor ``(L, H, D/2)``: ``True`` where pair ``k`` of head
            ``h`` in layer ``l`` is removed from the queries and the keys.

    Returns:
        The ablated copy, in evaluation mode.

    Raises:
        TypeError: ``model`` not a TinyTransformer, ``drop`` not a bool tensor.
        ValueError: ``drop`` of the wrong shape; a model with grouped or shared
            keys and values, or with ``qk_norm``.
    """
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer, got {type(model).__name__}")
    cfg = model.config
    if cfg.key_value_heads != cfg.n_heads or cfg.shared_kv:
        raise ValueError(
            "pair ablation zeroes the key rows of each query head's own key head, so it "
            "needs kv_heads == n_heads and shared_kv=False; got "
            f"kv_heads={cfg.key_value_heads}, n_heads={cfg.n_heads}, shared_kv={cfg.shared_kv} "
            "(those rows would belong to the values or to other heads' keys)"
        )
    if cfg.qk_norm:
        raise ValueError(
            "pair ablation of a model with qk_norm=True would not remove the pairs' share "
            "of the scores: the queries and keys are RMS-normalised after the projection, "
            "which scales the pairs left up"
        )
    expected = (cfg.n_layers, cfg.n_heads, cfg.head_dim // 2)
    if not isinstance(drop, torch.Tensor) or drop.dtype != torch.bool:
        raise TypeError(f"drop must be a bool tensor {expected} (layers, heads, pairs)")
    if tuple(drop.shape) != expected:
        raise ValueError(
            f"drop must have shape {expected} (layers, heads, pairs), got {tuple(drop.shape)}"
        )
    rope = cfg.rope if cfg.rope is not None else Rope(cfg.head_dim)  # NoPE: the same pairs
    ablated = copy.deepcopy(model)
    with torch.no_grad():
        for layer, layer_drop in enumerate(drop.cpu()):
            query_rows = pair_columns(layer_drop, rope)  # rows of W_q
            rows = torch.cat((query_rows, cfg.dim + query_rows))  # and of W_k
            block = ablated.blocks[layer]
            assert isinstance(block, Block)
            weight = block.attn.qkv.weight  # (3C, C): rows of W_q, then W_k, then W_v
            weight[rows.to(weight.device)] = 0.0
    return ablated.eval()


def offset_attention(weights: torch.Tensor, offset: int) -> torch.Tensor:
    """Mean attention weight a query gives to the key ``offset`` positions before it.

    ``offset = 0`` measures a diagonal head (each token attends to itself),
    ``offset = 1`` a previous-token head; both are 1 for a perfect head. The
    mean runs over the queries that have such a key (positions ``offset .. T-1``).

    Args:
        weights: attention weights ``(..., T, T)`` (rows: queries).
        offset: the distance ``r >= 0``, smaller than ``T``.

    Returns:
        Tensor ``(...)``.
    """
    if not isinstance(weights, torch.Tensor) or weights.ndim < 2:
        raise TypeError("weights must be a torch.Tensor of shape (..., T, T)")
    if weights.shape[-2] != weights.shape[-1]:
        raise ValueError(
            "weights must be square, (..., T, T) with a row per query and a column per "
            f"key of the same sequence, got {tuple(weights.shape)}"
        )
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if not 0 <= offset < weights.shape[-1]:
        raise ValueError(f"offset must lie in [0, {weights.shape[-1]}), got {offset}")
    return weights.diagonal(offset=-offset, dim1=-2, dim2=-1).mean(-1)


def spread_vector(
    dim: int,
    pairs: Sequence[int],
    norm: float = 1.0,
    *,
    rope: Rope | None = None,
) -> torch.Tensor:
    r"""A vector :math:`\psi` whose norm ``norm`` is spread equally over the chosen pairs.

    Each chosen pair gets :math:`(\text{norm}/\sqrt{n}, 0)`, every other pair
    ``(0, 0)``, so :func:`pair_norms` of the result is ``norm / sqrt(n)`` on
    the chosen pairs and 0 elsewhere. The pairs sit where ``rope``'s layout
    puts them (default ``Rope(dim)``, interleaved).

    Returns:
        float64 tensor ``(d,)``.
    """
    dim = check_even_dim(dim)
    rope = Rope(dim) if rope is None else rope
    rope.check_dim(dim, "dim")
    chosen = _check_indices(pairs, "pairs", dim // 2)
    if not chosen:
        raise ValueError("pairs must name at least one pair")
    norm = check_positive_number(norm, "norm")
    psi = torch.zeros(dim, dtype=torch.float64)
    psi[pair_dims(rope)[chosen, 0]] = norm / math.sqrt(len(chosen))
    return psi


def diagonal_head(
    dim: int,
    seq_len: int,
    pairs: Sequence[int],
    norm: float,
    *,
    rope: Rope | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Queries and keys of a hand-built diagonal head: :math:`q_m = k_n = \psi` everywhere.

    Under RoPE the score is :math:`\sum_k \lVert\psi^{(k)}\rVert^2
    \cos((n - m)\theta_k)`, largest at ``n = m`` whatever the tokens are
    (Barbero et al., Theorem 5.3); a larger ``norm`` sharpens the softmax.

    Returns:
        ``(q, k)``, each float64 ``(1, 1, T, d)``, to pass to
        :func:`rope_lessons.toy.rotary_attention.attention` (with a ``v`` of your choice).
    """
    seq_len = check_positive_int(seq_len, "seq_len")
    psi = spread_vector(dim, pairs, norm, rope=rope)
    q = psi.expand(1, 1, seq_len, dim).clone()
    return q, q.clone()


def previous_token_head(
    dim: int,
    seq_len: int,
    pairs: Sequence[int],
    norm: float,
    *,
    rope: Rope | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Queries and keys of a hand-built previous-token head: :math:`q_m = \psi, k_n = R_1\psi`.

    The key is :math:`\psi` turned on by one position, so the score is
    :math:`\langle R_m\psi, R_{n+1}\psi\rangle = \sum_k
    \lVert\psi^{(k)}\rVert^2\cos((n + 1 - m)\theta_k)`, largest at
    ``n = m - 1``. ``rope`` (default ``Rope(dim)``) places the pairs and turns the key.

    Returns:
        ``(q, k)``, each float64 ``(1, 1, T, d)``.
    """
    rope = Rope(check_even_dim(dim)) if rope is None else rope
    q, _ = diagonal_head(dim, seq_len, pairs, norm, rope=rope)
    one = torch.ones(seq_len, dtype=torch.long)
    k = rope.apply(q, one, scale=False)
    return q, k


@torch.no_grad()
def mean_pair_norms(
    model: TinyTransformer, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean norm of each rotary pair of the queries and keys, per layer and head.

    The queries and keys are those of
    :meth:`~rope_lessons.toy.model.TinyTransformer.layer_qkv` (before rotation, which
    does not change pair norms), averaged over the batch and
    every position: Barbero et al.'s measure of which frequencies a head uses.

    Args:
        model: a RoPE model.
        tokens: token ids ``(B, T)``.

    Returns:
        ``(query_norms, key_norms)``, each ``(L, H, D/2)``: layers, heads, pairs.
    """
    rope = model.config.rope
    if rope is None:
        raise ValueError(f"a RoPE model is needed, got position={model.config.position!r}")
    return qkv_pair_norms(model.layer_qkv(tokens), rope)


def qkv_pair_norms(layers_qkv: Sequence[QKV], rope: Rope) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`mean_pair_norms` from any model's unrotated queries and keys.

    Args:
        layers_qkv: one :class:`~rope_lessons.toy.model.QKV` per layer (e.g. from
            ``layer_qkv`` of a toy or of :class:`rope_lessons.real.pretrained.Pretrained`).
        rope: the spec whose layout says where the pairs sit.

    Returns:
        ``(query_norms, key_norms)``: ``(L, H, D/2)`` and ``(L, H_kv, D/2)``, the
        mean of :func:`pair_norms` over the batch and every position.
    """
    queries = torch.stack([pair_norms(qkv.q, rope).mean(dim=(0, 2)) for qkv in layers_qkv])
    keys = torch.stack([pair_norms(qkv.k, rope).mean(dim=(0, 2)) for qkv in layers_qkv])
    return queries, keys


def pair_energy_shares(layers_qkv: Sequence[QKV], rope: Rope) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Each pair's share of a head's mean squared query and key norm.

    For head ``h`` of layer ``l``, pair ``k``'s share of the queries is
    :math:`\mathbb E\lVert q^{(k)}\rVert^2 / \mathbb E\lVert q\rVert^2`, the mean over
    the batch and every position. The squared pair norms add up to the squared
    norm, so the shares of a head sum to 1, and the shares of a set of pairs
    say how much of the head's dot products those pairs can carry. (Squaring
    :func:`qkv_pair_norms`, the mean norm, gives another, slightly different
    number.)

    Args:
        layers_qkv: one :class:`~rope_lessons.toy.model.QKV` per layer.
        rope: the spec whose layout says where the pairs sit.

    Returns:
        ``(query_shares, key_shares)``: ``(L, H, D/2)`` and ``(L, H_kv, D/2)``,
        float64, each head's shares summing to 1.
    """

    def shares(x: torch.Tensor) -> torch.Tensor:
        energy = (pair_norms(x, rope).double() ** 2).mean(dim=(0, 2))  # (H, D/2)
        return energy / energy.sum(-1, keepdim=True)

    queries = torch.stack([shares(qkv.q) for qkv in layers_qkv])
    keys = torch.stack([shares(qkv.k) for qkv in layers_qkv])
    return queries, keys


def norm_matched_pairs(
    shares: torch.Tensor, quarter: Sequence[int], generator: torch.Generator
) -> torch.Tensor:
    """For every head, random pairs outside ``quarter`` that hold as much norm as ``quarter``.

    The control of an ablation: removing a set of pairs costs something
    because of the frequencies it holds, or merely because of the norm it
    holds. Per head, the pairs outside ``quarter`` are walked in a random
    order, each kept when it brings the summed share closer to the share of
    ``quarter``, until the sum reaches it (a pair that would overshoot by more
    than it gains is skipped, and the walk goes on).

    Args:
        shares: ``(..., P)`` each pair's share of a head's norm (e.g. squared
            mean pair norms over their sum), ``P`` pairs; finite.
        quarter: the pair indices whose share is matched.
        generator: the random generator (seeded by the caller).

    Returns:
        bool tensor of the shape of ``shares``: the chosen pairs of every head.
    """
    if not isinstance(shares, torch.Tensor) or not shares.is_floating_point():
        raise TypeError("shares must be a floating tensor (..., pairs)")
    if not bool(torch.isfinite(shares).all()):
        raise ValueError(
            "shares must be finite (a NaN share compares false with every target, "
            "and its head would get no pairs)"
        )
    pairs = shares.shape[-1]
    target_pairs = _check_indices(quarter, "quarter", pairs)
    others = torch.tensor([k for k in range(pairs) if k not in target_pairs])
    flat = shares.reshape(-1, pairs).double().cpu()
    chosen = torch.zeros(flat.shape, dtype=torch.bool)
    for row, head in enumerate(flat):
        target = float(head[target_pairs].sum())
        total = 0.0
        for k in others[torch.randperm(len(others), generator=generator)].tolist():
            if total >= target:
                break
            share = float(head[k])
            if abs(total + share - target) < abs(total - target):
                chosen[row, k] = True
                total += share
    return chosen.reshape(shares.shape).to(shares.device)
