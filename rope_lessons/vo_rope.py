r"""VO-RoPE (chapter 6): shared keys and values, cache sizes, readings, and rank agreement.

Four jobs, each small:

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
  Su's post); :func:`trained_angles` stores the frequencies a model ends
  with, and :func:`stored_angles` reads them back.
* **Rank agreement.** :func:`kendall_tau` (tau-b, with ties),
  :func:`ranks`, the exact null tail :func:`kendall_tau_tail` and
  :func:`bootstrap_kendall_tau`, to compare a toy ranking of the nine
  placements with Su's (kexue.fm/archives/10862); :func:`rank_pairs` and
  :func:`noise_tiers` say which pairs the toy seeds resolve (a paired 95%
  interval) and which ones Su calls about equal (:data:`SU_2025_TIERS`).

Shapes: ``B`` batch, ``H`` heads, ``T`` sequence length, ``D`` head dimension,
``S`` seeds, ``P`` placements.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from rope_lessons._checks import check_positive_int
from rope_lessons.attention import Placement, attention, rotate_inputs, rotate_output
from rope_lessons.experiments import held_out, t_quantile_975
from rope_lessons.model import Block, TinyTransformer
from rope_lessons.rope import Rope
from rope_lessons.spectrum import pair_dims

if TYPE_CHECKING:
    from rope_lessons.experiments import Run

FloatArray = npt.NDArray[np.float64]


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
        placement: one of :data:`~rope_lessons.attention.PLACEMENTS`.
        rope, positions: as in :func:`~rope_lessons.attention.attention`.

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
    ``shift..shift+T-1``; ``rope`` as in :func:`~rope_lessons.attention.attention`.
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
    :func:`~rope_lessons.attention.rotate_inputs` and
    :func:`~rope_lessons.attention.rotate_output`; the kernel for one query is
    PyTorch's fused softmax attention, as in
    :func:`~rope_lessons.attention.attention`.

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
        run: its :class:`~rope_lessons.experiments.Run` (data and training length).
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


def _as_vector(values: object, name: str) -> FloatArray:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of numbers") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite")
    return array


def ranks(values: Sequence[float] | FloatArray) -> FloatArray:
    """Rank of each value, 1 for the smallest; tied values share their average rank.

    >>> ranks([2.7, 2.9, 2.7, 2.5]).tolist()
    [2.5, 4.0, 2.5, 1.0]
    """
    array = _as_vector(values, "values")
    below = (array[None, :] < array[:, None]).sum(axis=1)  # how many are smaller
    equal = (array[None, :] == array[:, None]).sum(axis=1)  # ties, itself included
    result: FloatArray = (below + (equal + 1) / 2.0).astype(np.float64)
    return result


def kendall_tau(x: Sequence[float] | FloatArray, y: Sequence[float] | FloatArray) -> float:
    r"""Kendall's rank correlation :math:`\tau_b` between two equally long sequences.

    Over all pairs :math:`i < j`, a pair is concordant when ``x`` and ``y``
    order it the same way and discordant when they order it oppositely;

    .. math::
        \tau_b = \frac{n_c - n_d}{\sqrt{(n_0 - t_x)(n_0 - t_y)}},

    with :math:`n_0 = n(n-1)/2` and :math:`t_x, t_y` the pairs tied in ``x``
    or in ``y``. Without ties it is :math:`(n_c - n_d) / n_0`, in
    :math:`[-1, 1]`: 1 for the same order, -1 for the reversed order.

    Raises:
        ValueError: lengths differ, fewer than two values, non-finite values,
            or one sequence constant (tau undefined).
    """
    a, b = _as_vector(x, "x"), _as_vector(y, "y")
    if a.shape != b.shape:
        raise ValueError(f"x and y must have the same length, got {a.size} and {b.size}")
    if a.size < 2:
        raise ValueError("kendall_tau needs at least two values")
    upper = np.triu_indices(a.size, k=1)  # every pair i < j once
    sign_a = np.sign(a[:, None] - a[None, :])[upper]
    sign_b = np.sign(b[:, None] - b[None, :])[upper]
    untied_a, untied_b = np.count_nonzero(sign_a), np.count_nonzero(sign_b)
    if untied_a == 0 or untied_b == 0:
        raise ValueError("kendall_tau is undefined when x or y is constant")
    return float((sign_a * sign_b).sum() / math.sqrt(untied_a * untied_b))


def kendall_tau_tail(tau: float, n: int) -> float:
    r"""Exact :math:`P(\tau \ge` ``tau`` :math:`)` for two independent random orders of ``n`` items.

    Under independence every permutation is equally likely, and
    :math:`\tau = 1 - 4 I / (n(n-1))` for a permutation with :math:`I`
    inversions, so :math:`\tau \ge t` is :math:`I \le (1 - t)\, n(n-1)/4`.
    Inserting item ``s`` into an order of ``s - 1`` items adds ``0 .. s-1``
    inversions, each with probability ``1/s``: the distribution of :math:`I`
    is the convolution of these uniform steps (the Mahonian numbers divided
    by ``n!``). It is built as probabilities, never as counts (``n!``
    overflows a float from ``n = 171``), and cut at the largest :math:`I` of the
    tail (inversions only grow). Sums of positive terms only, so the tail is
    exact to rounding even far out. Cost ``O(n * I_max * n)``: fine for the
    hundreds of items of a ranking, slow for many thousands. No ties.

    >>> round(kendall_tau_tail(1.0, 4), 6)  # only the identity: 1/4!
    0.041667
    """
    n = check_positive_int(n, "n")
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not -1 <= tau <= 1:
        raise ValueError(f"tau must be a number in [-1, 1], got {tau!r}")
    pairs = n * (n - 1) // 2
    most = min(pairs, math.floor((1.0 - tau + 1e-12) * pairs / 2))  # largest I with tau >= tau
    probs = np.array([1.0])  # P(I = i) for 1 item, i <= most
    for size in range(2, n + 1):
        probs = np.convolve(probs, np.full(size, 1.0 / size))[: most + 1]
    return float(min(1.0, probs.sum()))


def bootstrap_kendall_tau(
    losses: FloatArray, reference: Sequence[float] | FloatArray, *, resamples: int, seed: int
) -> FloatArray:
    """Kendall tau between the seed-mean of ``losses`` and ``reference``, seeds resampled.

    A draw whose seed means are all equal (possible when seeds tie every
    placement) orders no pair of placements, so it neither agrees nor
    disagrees with ``reference``: its tau is 0. (Tau-b's numerator
    :math:`n_c - n_d` is 0 there; only its denominator vanishes, which leaves
    :func:`kendall_tau` undefined.)

    Args:
        losses: ``(S, P)``: one row of per-placement losses per seed; finite.
        reference: ``(P,)``: the published losses, in the same column order;
            not all equal.
        resamples: bootstrap draws; each picks ``S`` seeds with replacement.
        seed: seed of NumPy's generator, so the draws are reproducible.

    Returns:
        ``(resamples,)``: tau of every draw.
    """
    table = np.asarray(losses, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] < 1:
        raise ValueError(f"losses must have shape (seeds, placements), got {table.shape}")
    if not np.isfinite(table).all():
        raise ValueError("losses must be finite")
    target = _as_vector(reference, "reference")
    if target.size != table.shape[1]:
        raise ValueError(
            f"reference has {target.size} entries but losses has {table.shape[1]} columns"
        )
    if target.size < 2:
        raise ValueError(f"tau needs at least two placements, got {target.size}")
    if (target == target[0]).all():
        raise ValueError("reference must not be constant: it orders no pair, tau is undefined")
    check_positive_int(resamples, "resamples")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, table.shape[0], size=(resamples, table.shape[0]))  # (R, S)
    means = table[picks].mean(axis=1)  # (R, P)
    return np.array(
        [kendall_tau(row, target) if (row != row[0]).any() else 0.0 for row in means],
        dtype=np.float64,
    )


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
keys are the placement names of :data:`~rope_lessons.attention.PLACEMENTS`."""

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


@dataclass(frozen=True)
class RankPair:
    """One pair of placements in a toy ranking set beside a published one.

    ``first`` comes before ``second`` in the published order (lower or equal
    published loss). Differences are ``second - first``, so a positive
    ``difference`` agrees with the published order.

    Attributes:
        first, second: placement names.
        difference: mean over seeds of the paired toy difference.
        half_width: half-width of its paired 95% interval (Student's t);
            infinite with one seed.
        reference_difference: published ``second - first``.
        same_tier: the publication puts both in one tier (calls them about equal).
    """

    first: str
    second: str
    difference: float
    half_width: float
    reference_difference: float
    same_tier: bool

    @property
    def resolved(self) -> bool:
        """The toy seeds order the pair: the 95% interval excludes zero."""
        return abs(self.difference) > self.half_width

    @property
    def discordant(self) -> bool:
        """The toy seed means and the published losses order the pair oppositely."""
        return self.difference * self.reference_difference < 0

    @property
    def verdict(self) -> str:
        """``agree``/``disagree`` when both sides order the pair; else which side ties it."""
        if self.same_tier and not self.resolved:
            return "tie on both sides"
        if self.same_tier:
            return "published tie"
        if not self.resolved:
            return "toy within noise"
        return "disagree" if self.discordant else "agree"


def _loss_table(losses: FloatArray, names: Sequence[str]) -> FloatArray:
    """``losses`` as float64 ``(P, S)``, one row per name, if finite with at least one seed."""
    table = np.asarray(losses, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] != len(names):
        raise ValueError(
            f"losses must have shape (len(names), seeds) = ({len(names)}, S), got {table.shape}"
        )
    if table.shape[1] < 1:
        raise ValueError("losses must hold at least one seed (one column)")
    if not np.isfinite(table).all():
        raise ValueError("losses must be finite")
    return table


def _paired_interval(gaps: FloatArray) -> tuple[float, float]:
    """Mean of the paired differences ``gaps`` ``(S,)`` and the half-width of its 95%
    interval (Student's t); infinite with one seed."""
    seeds = gaps.shape[0]
    if seeds < 2:
        return float(gaps.mean()), math.inf
    spread = float(gaps.std(ddof=1)) / math.sqrt(seeds)
    return float(gaps.mean()), t_quantile_975(seeds - 1) * spread


def rank_pairs(
    losses: FloatArray, names: Sequence[str], reference: dict[str, float], tiers: dict[str, int]
) -> list[RankPair]:
    """Every pair of placements: the toy's paired 95% interval beside the published order.

    Args:
        losses: ``(P, S)``: the toy loss of each placement (rows, in the order
            of ``names``) for each seed (columns; the same seed in a column
            means the same initial weights and batches, so differences are paired).
        names: the ``P`` placement names.
        reference: the published loss of every name.
        tiers: the published tier of every name (equal tier: called about equal).

    Returns:
        The ``P (P - 1) / 2`` pairs, ``first`` before ``second`` in the published order.
    """
    table = _loss_table(losses, names)
    missing = [n for n in names if n not in reference or n not in tiers]
    if missing:
        raise ValueError(f"no published loss or tier for {missing}")
    ordered = sorted(range(len(names)), key=lambda i: reference[names[i]])
    pairs = []
    for a, i in enumerate(ordered):
        for j in ordered[a + 1 :]:
            difference, half_width = _paired_interval(table[j] - table[i])  # second - first
            pairs.append(
                RankPair(
                    first=names[i],
                    second=names[j],
                    difference=difference,
                    half_width=half_width,
                    reference_difference=reference[names[j]] - reference[names[i]],
                    same_tier=tiers[names[i]] == tiers[names[j]],
                )
            )
    return pairs


def noise_tiers(losses: FloatArray, names: Sequence[str]) -> list[list[str]]:
    """The toy ranking as tiers: sorted by seed mean, a new tier wherever neighbours separate.

    Two neighbours in the sorted order share a tier when the paired 95%
    interval of their difference (as in :func:`rank_pairs`) includes zero.
    A tier can therefore hold two placements that are resolved from each
    other through a chain of unresolved neighbours.

    >>> noise_tiers(np.array([[1.0, 1.1, 0.9], [1.05, 1.0, 1.0], [2.0, 2.1, 2.2]]), "abc")
    [['a', 'b'], ['c']]

    Raises:
        ValueError: ``losses`` not ``(len(names), S)``, not finite, or without
            a placement or a seed.
    """
    table = _loss_table(losses, names)
    if table.shape[0] < 1:
        raise ValueError("losses must hold at least one placement (one row) to rank")
    order = np.argsort(table.mean(axis=1), kind="stable")
    tiers = [[names[order[0]]]]
    for previous, current in itertools.pairwise(order):
        difference, half_width = _paired_interval(table[current] - table[previous])
        if abs(difference) > half_width:
            tiers.append([names[current]])
        else:
            tiers[-1].append(names[current])
    return tiers


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
