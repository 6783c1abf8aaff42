r"""Rank statistics: how far two orderings agree, and which pairs seeds resolve.

Chapter 6 ranks nine RoPE placements on a toy model and sets the ranking
beside a published one; the tools are general. :func:`ranks` (average ranks
for ties), :func:`kendall_tau` (tau-b), the exact null tail
:func:`kendall_tau_tail` and :func:`bootstrap_kendall_tau` (seeds resampled)
measure agreement, each computed by ``scipy.stats`` (``rankdata``,
``kendalltau``, ``bootstrap``) behind checks of its input;
:func:`rank_pairs` and :func:`noise_tiers` say which pairs the seeds order,
with the paired 95% interval of
:func:`~rope_lessons.evidence.comparisons.compare_paired` (the same
:class:`~rope_lessons.evidence.comparisons.Summary`).

Shapes: ``S`` seeds, ``P`` ranked items (placements).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from rope_lessons._checks import check_positive_int
from rope_lessons.evidence.comparisons import summarise

FloatArray = npt.NDArray[np.float64]


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
    result: FloatArray = np.asarray(
        stats.rankdata(_as_vector(values, "values"), method="average"), dtype=np.float64
    )
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
    Computed by ``scipy.stats.kendalltau`` (``variant="b"``; its p-value is not used).

    Raises:
        ValueError: lengths differ, fewer than two values, non-finite values,
            or one sequence constant (tau undefined).
    """
    a, b = _as_vector(x, "x"), _as_vector(y, "y")
    if a.shape != b.shape:
        raise ValueError(f"x and y must have the same length, got {a.size} and {b.size}")
    if a.size < 2:
        raise ValueError("kendall_tau needs at least two values")
    if (a == a[0]).all() or (b == b[0]).all():
        raise ValueError("kendall_tau is undefined when x or y is constant")
    # method="auto": the exact p-value refuses ties, which tau-b allows; tau is the same
    return float(stats.kendalltau(a, b, variant="b", method="auto").statistic)


def kendall_tau_tail(tau: float, n: int) -> float:
    r"""Exact :math:`P(\tau \ge` ``tau`` :math:`)` for two independent random orders of ``n`` items.

    Under independence every permutation is equally likely, and
    :math:`\tau = 1 - 4 I / (n(n-1))` for a permutation with :math:`I`
    inversions, so :math:`\tau \ge t` is :math:`I \le (1 - t)\, n(n-1)/4`.
    Inserting item ``s`` into an order of ``s - 1`` items adds ``0 .. s-1``
    inversions, each with probability ``1/s``: the distribution of :math:`I`
    is the convolution of these uniform steps (the Mahonian numbers divided
    by ``n!``). ``scipy.stats.kendalltau`` (``method="exact"``,
    ``alternative="greater"``) sums it up to the largest :math:`I` of the tail,
    given an order of ``n`` items with that many inversions; from ``n = 171``,
    where ``n!`` overflows a float, it divides by each step's size as it goes.
    Cost ``O(n * I_max)``: fine for the hundreds of items of a ranking, slow for
    many thousands. No ties.

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
    remaining, order, left = list(range(n)), [], most
    for place in range(n):  # an order with ``most`` inversions: at each place the
        step = min(left, n - 1 - place)  # ``step``-th smallest item left, which
        order.append(remaining.pop(step))  # ``step`` smaller items follow
        left -= step
    tail = stats.kendalltau(np.arange(n), order, method="exact", alternative="greater").pvalue
    return float(min(1.0, tail))


def bootstrap_kendall_tau(
    losses: FloatArray, reference: Sequence[float] | FloatArray, *, resamples: int, seed: int
) -> FloatArray:
    """Kendall tau between the seed-mean of ``losses`` and ``reference``, seeds resampled.

    ``scipy.stats.bootstrap`` draws the resamples: each picks ``S`` seeds with
    replacement and keeps each picked seed's whole row (``paired=True``), so the
    placements of one seed stay together. Only its bootstrap distribution is
    returned: the caller takes the percentiles it reads (chapter 6: 5% and 95%).
    With one seed every draw is that seed.

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
        seed: seed of the NumPy generator (``numpy.random.default_rng``) that
            draws the resamples, so the draws are reproducible.

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

    def statistic(*columns: FloatArray, axis: int = -1) -> FloatArray:
        """Tau of each draw: ``columns`` are the ``P`` placements' ``(..., S)`` resamples
        (scipy passes ``axis=-1``, the seeds)."""
        means = np.stack(columns, axis=-1).mean(axis=-2)  # (..., S, P) -> (..., P)
        rows = means.reshape(-1, target.size)
        taus = [kendall_tau(row, target) if (row != row[0]).any() else 0.0 for row in rows]
        result: FloatArray = np.array(taus, dtype=np.float64).reshape(means.shape[:-1])
        return result

    if table.shape[0] == 1:  # scipy needs two seeds to resample; one seed gives one draw
        return np.full(resamples, float(statistic(*table.T)), dtype=np.float64)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        # scipy also returns the draws' standard error, unused here: one draw has none
        warnings.filterwarnings("ignore", "Degrees of freedom <= 0", RuntimeWarning)
        result = stats.bootstrap(
            tuple(table.T),  # P samples of S seeds, resampled together
            statistic,
            n_resamples=resamples,
            paired=True,
            vectorized=True,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
    draws: FloatArray = np.asarray(result.bootstrap_distribution, dtype=np.float64)
    return draws


@dataclass(frozen=True)
class RankPair:
    """One pair of placements in a toy ranking set beside a published one.

    ``first`` comes before ``second`` in the published order (lower or equal
    published loss). Differences are ``second - first``, so a positive
    ``difference`` agrees with the published order.

    Attributes:
        first, second: placement names.
        difference: mean over seeds of the paired toy difference.
        half_width: half-width of its paired 95% interval (Student's t), for the
            family of comparisons :func:`rank_pairs` was given (Bonferroni);
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
        """The toy seeds order the pair: the (family-wise) 95% interval excludes zero."""
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


def _paired_interval(gaps: FloatArray, family: int = 1) -> tuple[float, float]:
    """Mean of the paired differences ``gaps`` ``(S,)`` and the half-width of its 95%
    interval for a ``family`` of comparisons read together, each at ``1 - 0.05 / family``
    (Bonferroni; :meth:`~rope_lessons.evidence.comparisons.Summary.half_width_at`; infinite with
    one seed)."""
    check_positive_int(family, "family")
    summary = summarise(gaps.tolist())
    return summary.mean, summary.half_width_at(1 - 0.05 / family)


def rank_pairs(
    losses: FloatArray,
    names: Sequence[str],
    reference: dict[str, float],
    tiers: dict[str, int],
    family: int = 1,
) -> list[RankPair]:
    """Every pair of placements: the toy's paired 95% interval beside the published order.

    Args:
        losses: ``(P, S)``: the toy loss of each placement (rows, in the order
            of ``names``) for each seed (columns; the same seed in a column
            means the same initial weights and batches, so differences are paired).
        names: the ``P`` placement names.
        reference: the published loss of every name.
        tiers: the published tier of every name (equal tier: called about equal).
        family: how many comparisons are read together: each interval is then
            95% for all of them at once (Bonferroni). The whole ranking read at
            once is the family of all ``P (P - 1) / 2`` pairs.

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
            difference, half_width = _paired_interval(table[j] - table[i], family)  # 2nd - 1st
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


def noise_tiers(losses: FloatArray, names: Sequence[str], family: int = 1) -> list[list[str]]:
    """The toy ranking as tiers: sorted by seed mean, a new tier wherever neighbours separate.

    Two neighbours in the sorted order share a tier when the paired 95%
    interval of their difference (as in :func:`rank_pairs`, for a ``family`` of
    comparisons read together) includes zero. A tier can therefore hold two
    placements that are resolved from each other through a chain of unresolved
    neighbours.

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
        difference, half_width = _paired_interval(table[current] - table[previous], family)
        if abs(difference) > half_width:
            tiers.append([names[current]])
        else:
            tiers[-1].append(names[current])
    return tiers
