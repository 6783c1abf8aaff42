"""Rank statistics (chapter 6's ranking of placements): ranks, Kendall tau, its
exact null tail and bootstrap, and which pairs the seeds resolve."""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.chapters.vo_rope import SU_2025_LOSSES
from rope_lessons.evidence.comparisons import summarise, t_quantile
from rope_lessons.evidence.ranking import (
    bootstrap_kendall_tau,
    kendall_tau,
    kendall_tau_tail,
    noise_tiers,
    rank_pairs,
    ranks,
)

# ---------------------------------------------------------------- Kendall tau


@pytest.mark.parametrize(
    ("x", "y", "tau"),
    [
        ([1, 2, 3], [1, 2, 3], 1.0),
        ([1, 2, 3], [3, 2, 1], -1.0),
        ([1, 2, 3], [1, 3, 2], 1 / 3),  # pairs (1,2) and (1,3) agree, (2,3) does not
        ([1, 2, 3, 4], [2, 1, 4, 3], 1 / 3),  # 4 concordant, 2 discordant of 6
        # tau-b with a tie in y: n_c=2, n_d=0, untied pairs 3 in x and 2 in y
        ([1, 2, 3], [1, 2, 2], 2 / math.sqrt(6)),
    ],
)
def test_kendall_tau_hand_cases(x: list[float], y: list[float], tau: float) -> None:
    assert kendall_tau(x, y) == pytest.approx(tau, abs=1e-12)


def test_kendall_tau_counts_pairs_like_a_loop() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=9), rng.normal(size=9)
    concordant = discordant = 0
    for i, j in itertools.combinations(range(9), 2):
        product = (x[i] - x[j]) * (y[i] - y[j])
        concordant += product > 0
        discordant += product < 0
    assert kendall_tau(x, y) == pytest.approx((concordant - discordant) / 36, abs=1e-12)


whole = st.integers(-1000, 1000)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(whole, whole), min_size=2, max_size=12, unique_by=(lambda t: t[0], lambda t: t[1])
    )
)
def test_kendall_tau_properties(pairs: list[tuple[int, int]]) -> None:
    x = np.array([a for a, _ in pairs])
    y = np.array([b for _, b in pairs])
    tau = kendall_tau(x, y)
    assert -1.0 - 1e-12 <= tau <= 1.0 + 1e-12
    assert kendall_tau(y, x) == pytest.approx(tau, abs=1e-12)  # symmetric
    assert kendall_tau(x, -y) == pytest.approx(-tau, abs=1e-12)  # reversing one flips it
    assert kendall_tau(np.exp(x / 1000), y) == pytest.approx(tau, abs=1e-12)  # ranks only
    assert kendall_tau(x, x) == pytest.approx(1.0)
    order = np.argsort(x)
    assert kendall_tau(x[order], y[order]) == pytest.approx(tau, abs=1e-12)  # order of items


def _tau_b_by_pairs(x: list[int], y: list[int]) -> float:
    """Tau-b by looping over the pairs: concordant minus discordant over the square root of
    the pairs untied in x times the pairs untied in y."""
    concordant = discordant = untied_x = untied_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        concordant += dx * dy > 0
        discordant += dx * dy < 0
        untied_x += dx != 0
        untied_y += dy != 0
    return (concordant - discordant) / math.sqrt(untied_x * untied_y)


small = st.lists(st.integers(0, 3), min_size=2, max_size=7)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_kendall_tau_is_tau_b_counted_pair_by_pair_with_ties(data: st.DataObject) -> None:
    """Tau-b (not tau-a, not tau-c): with ties in x or y the denominator counts only the
    untied pairs of each, here by an explicit loop over up to 7 items with many ties."""
    x = data.draw(small.filter(lambda v: len(set(v)) > 1))
    y = data.draw(
        st.lists(st.integers(0, 3), min_size=len(x), max_size=len(x)).filter(
            lambda v: len(set(v)) > 1
        )
    )
    assert kendall_tau(x, y) == pytest.approx(_tau_b_by_pairs(x, y), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=12))
def test_ranks_are_average_ranks_counted_by_hand(values: list[int]) -> None:
    """Rank = how many are smaller + (how many are equal, itself included, + 1) / 2."""
    expected = [sum(w < v for w in values) + (sum(w == v for w in values) + 1) / 2 for v in values]
    assert ranks(values).tolist() == expected


def test_kendall_tau_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        kendall_tau([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least two"):
        kendall_tau([1], [1])
    with pytest.raises(ValueError, match="constant"):
        kendall_tau([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        kendall_tau([1, float("nan"), 3], [1, 2, 3])
    with pytest.raises(ValueError, match="one-dimensional"):
        # deliberately ill-typed: the runtime check is under test
        kendall_tau([[1, 2]], [[1, 2]])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="x must be a sequence"):
        kendall_tau("abc", [1, 2, 3])  # type: ignore[arg-type]


def test_ranks_average_ties_and_match_sorting() -> None:
    assert ranks([2.7, 2.9, 2.7, 2.5]).tolist() == [2.5, 4.0, 2.5, 1.0]
    values = np.random.default_rng(1).normal(size=20)
    assert (ranks(values) == np.argsort(np.argsort(values)) + 1).all()


def test_tau_tail_matches_enumeration() -> None:
    """The exact null tail equals a count over all 7! orders."""
    n = 7
    reference = list(range(n))
    taus = np.array([kendall_tau(reference, perm) for perm in itertools.permutations(reference)])
    for tau in (-1.0, -0.2, 0.0, 1 / 7, 0.5, 1.0):
        assert kendall_tau_tail(tau, n) == pytest.approx(float((taus >= tau - 1e-12).mean()))
    with pytest.raises(ValueError, match="tau"):
        kendall_tau_tail(1.5, n)
    with pytest.raises(ValueError, match="n must be >= 2"):
        kendall_tau_tail(0.0, 1)


@functools.cache
def _inversions_of_every_order(n: int) -> tuple[int, ...]:
    """The inversion count of each of the ``n!`` orders of ``n`` items, by brute force."""
    return tuple(
        sum(a > b for a, b in itertools.combinations(order, 2))
        for order in itertools.permutations(range(n))
    )


@settings(max_examples=150, deadline=None)
@given(n=st.integers(2, 7), tau=st.floats(-1.0, 1.0), attainable=st.booleans())
def test_tau_tail_counts_the_orders_with_at_least_that_tau(
    n: int, tau: float, attainable: bool
) -> None:
    """P(tau >= t) is the share of the n! orders whose tau = 1 - 4 I / (n (n - 1)) reaches
    t, for any t in [-1, 1] and for the attainable values themselves (the tail is closed)."""
    pairs = n * (n - 1) // 2
    if attainable:  # snap to the nearest tau an order can have
        tau = 1 - 2 * round((1 - tau) * pairs / 2) / pairs
    inversions = _inversions_of_every_order(n)
    share = sum(1 - 2 * i / pairs >= tau - 1e-12 for i in inversions) / len(inversions)
    assert kendall_tau_tail(tau, n) == pytest.approx(share, rel=1e-12, abs=1e-15)


def _exact_tau_tail(tau: float, n: int) -> Fraction:
    """P(tau >= ``tau``) for ``n`` items from the Mahonian numbers, in exact integers."""
    pairs = n * (n - 1) // 2
    most = math.floor((1 - Fraction(tau).limit_denominator()) * pairs / 2)  # tau >= t: I <= most
    counts = [1]  # permutations of 1 item by number of inversions, cut at `most`
    for size in range(2, n + 1):  # inserting item `size` adds 0 .. size-1 inversions
        prefix = [0, *itertools.accumulate(counts)]
        top = min(most, len(counts) - 1 + size - 1)
        counts = [
            prefix[min(i, len(counts) - 1) + 1] - prefix[max(0, i - size + 1)]
            for i in range(top + 1)
        ]
    return Fraction(sum(counts), math.factorial(n))


def test_tau_tail_for_many_items_matches_exact_integers() -> None:
    """n! overflows a float from n = 171: the tail must still be a probability, and exact."""
    assert _exact_tau_tail(0.5, 9) == Fraction(13_640, 362_880)  # the 7! check's method, n = 9
    assert kendall_tau_tail(0.5, 9) == pytest.approx(0.0376, abs=5e-5)
    for tau in (0.5, 0.1, -0.05):
        exact = float(_exact_tau_tail(tau, 200))
        assert kendall_tau_tail(tau, 200) == pytest.approx(exact, rel=1e-9, abs=0)
    # the normal approximation, var(tau) = 2(2n+5) / (9n(n-1)), is good near the centre
    sd = math.sqrt(2 * (2 * 200 + 5) / (9 * 200 * 199))
    assert kendall_tau_tail(0.1, 200) == pytest.approx(
        0.5 * math.erfc(0.1 / sd / math.sqrt(2)), rel=0.05
    )


def test_bootstrap_with_identical_seeds_has_no_spread() -> None:
    reference = list(SU_2025_LOSSES.values())
    losses = np.tile(np.array(reference)[::-1], (3, 1))  # every seed: the reversed order
    taus = bootstrap_kendall_tau(losses, reference, resamples=50, seed=0)
    assert taus.shape == (50,)
    assert np.allclose(taus, -1.0)
    noisy = losses + np.random.default_rng(0).normal(scale=0.05, size=losses.shape)
    spread = bootstrap_kendall_tau(noisy, reference, resamples=200, seed=0)
    assert spread.std() > 0
    with pytest.raises(ValueError, match="columns"):
        bootstrap_kendall_tau(losses[:, :4], reference, resamples=5, seed=0)


def test_bootstrap_draws_whose_means_all_tie_have_tau_zero() -> None:
    """Seed 0 ties every placement: a draw of seed 0 alone has constant means, orders no
    pair, and gets tau 0 instead of aborting the bootstrap; the other draws order all."""
    losses = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]])  # (S, P)
    taus = bootstrap_kendall_tau(losses, [1.0, 2.0, 3.0], resamples=200, seed=0)
    assert taus.shape == (200,)
    assert set(taus.tolist()) == {0.0, 1.0}  # both kinds of draw occur (each about 1/4, 3/4)
    rng = np.random.default_rng(0)  # the same draws: tau 0 exactly where only seed 0 is picked
    only_seed_0 = (rng.integers(0, 2, size=(200, 2)) == 0).all(axis=1)
    assert ((taus == 0.0) == only_seed_0).all()


@settings(max_examples=30, deadline=None)
@given(
    seeds=st.integers(1, 6),
    placements=st.integers(2, 6),
    resamples=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_bootstrap_resamples_seeds_as_numpy_draws_them(
    seeds: int, placements: int, resamples: int, seed: int
) -> None:
    """Each draw: ``S`` seeds picked with replacement by ``default_rng(seed).integers``, the
    seed means of their rows, their tau-b against the reference counted pair by pair (0
    when the means all tie). Losses on a coarse grid, so that means tie often."""
    grid = np.random.default_rng(seed).integers(0, 3, size=(seeds, placements)) / 4
    reference = list(range(placements))
    taus = bootstrap_kendall_tau(grid, reference, resamples=resamples, seed=seed)
    picks = np.random.default_rng(seed).integers(0, seeds, size=(resamples, seeds))
    expected = []
    for pick in picks:
        means = grid[pick].mean(axis=0)
        ordered = len(set(means.tolist())) > 1
        expected.append(_tau_b_by_pairs(means.tolist(), reference) if ordered else 0.0)
    assert taus.shape == (resamples,)
    assert taus == pytest.approx(expected, abs=1e-12)


def test_bootstrap_refuses_a_constant_reference_and_non_finite_losses() -> None:
    losses = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.5]])
    with pytest.raises(ValueError, match="reference must not be constant"):
        bootstrap_kendall_tau(losses, [2.0, 2.0, 2.0], resamples=5, seed=0)
    with pytest.raises(ValueError, match="at least two placements, got 1"):
        bootstrap_kendall_tau(losses[:, :1], [2.0], resamples=5, seed=0)
    with pytest.raises(ValueError, match="at least two placements, got 0"):
        bootstrap_kendall_tau(losses[:, :0], [], resamples=5, seed=0)
    losses[1, 1] = math.nan
    with pytest.raises(ValueError, match="losses must be finite"):
        bootstrap_kendall_tau(losses, [1.0, 2.0, 3.0], resamples=5, seed=0)


def test_rank_pairs_by_hand() -> None:
    names = ["a", "b", "c"]
    reference = {"a": 1.0, "b": 2.0, "c": 3.0}
    tiers = {"a": 1, "b": 1, "c": 2}
    # b - a = (0.2, 0.2, 0.2): no spread, resolved, same direction as the reference
    # c - a = (-1, -1, -1): resolved against the reference; c - b: likewise
    losses = np.array([[1.0, 2.0, 3.0], [1.2, 2.2, 3.2], [0.0, 1.0, 2.0]])
    pairs = {(p.first, p.second): p for p in rank_pairs(losses, names, reference, tiers)}
    assert list(pairs) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert pairs["a", "b"].difference == pytest.approx(0.2)
    assert pairs["a", "b"].verdict == "published tie" and not pairs["a", "b"].discordant
    assert pairs["a", "c"].verdict == "disagree" and pairs["a", "c"].discordant
    assert pairs["b", "c"].reference_difference == pytest.approx(1.0)
    # noisy differences: the paired t interval, checked against its formula
    noisy = np.array([[1.0, 1.0, 1.0], [1.1, 0.9, 1.3], [5.0, 5.0, 5.0]])
    gap = next(p for p in rank_pairs(noisy, names, reference, tiers) if p.second == "b")
    assert gap.half_width == pytest.approx(t_quantile(0.95, 2) * 0.2 / math.sqrt(3))
    assert not gap.resolved and gap.verdict == "tie on both sides"
    one_seed = rank_pairs(losses[:, :1], names, reference, tiers)
    assert all(math.isinf(p.half_width) and not p.resolved for p in one_seed)
    with pytest.raises(ValueError, match="shape"):
        rank_pairs(losses[:2], names, reference, tiers)
    with pytest.raises(ValueError, match="no published"):
        rank_pairs(losses, names, {"a": 1.0, "b": 2.0}, tiers)
    with pytest.raises(ValueError, match="at least one seed"):  # no NaN means and warnings
        rank_pairs(losses[:, :0], names, reference, tiers)


def test_noise_tiers_split_where_neighbours_separate() -> None:
    names = ["a", "b", "c", "d"]
    losses = np.array(
        [[2.0, 2.1, 1.9], [1.0, 1.1, 0.9], [1.02, 1.0, 1.01], [3.0, 3.0, 3.1]]
    )  # b and c tie, then a, then d
    assert noise_tiers(losses, names) == [["b", "c"], ["a"], ["d"]]
    assert noise_tiers(losses[:, :1], names) == [["b", "c", "a", "d"]]  # one seed: no tiers


def test_a_family_widens_every_interval_by_bonferroni() -> None:
    """Read together, 36 pairs get intervals at 1 - 0.05/36 each: a gap resolved alone can
    tie in the family, and the tiers follow the same intervals."""
    names = ["a", "b", "c"]
    reference = {"a": 1.0, "b": 2.0, "c": 3.0}
    tiers = {"a": 1, "b": 2, "c": 3}
    # b - a = (0.10, 0.14, 0.06, 0.12, 0.08): mean 0.10, sd 0.0316
    losses = np.array([[1.0] * 5, [1.10, 1.14, 1.06, 1.12, 1.08], [3.0, 3.1, 2.9, 3.0, 3.05]])
    alone, together = (
        next(p for p in rank_pairs(losses, names, reference, tiers, family) if p.second == "b")
        for family in (1, 36)
    )
    sem = summarise([0.10, 0.14, 0.06, 0.12, 0.08]).sem
    assert alone.half_width == pytest.approx(t_quantile(0.95, 4) * sem)
    assert together.half_width == pytest.approx(t_quantile(1 - 0.05 / 36, 4) * sem)
    assert alone.verdict == "agree" and together.verdict == "toy within noise"
    assert noise_tiers(losses, names) == [["a"], ["b"], ["c"]]
    assert noise_tiers(losses, names, family=36) == [["a", "b"], ["c"]]
    with pytest.raises((TypeError, ValueError), match="family"):
        noise_tiers(losses, names, family=0)


def test_noise_tiers_refuse_non_finite_and_empty_losses() -> None:
    """A NaN mean would be sorted silently (last, by argsort); no placement, or no seed,
    leaves nothing to rank."""
    with pytest.raises(ValueError, match="losses must be finite"):
        noise_tiers(np.array([[1.0, math.nan], [2.0, 2.1]]), ["a", "b"])
    with pytest.raises(ValueError, match="at least one placement"):
        noise_tiers(np.zeros((0, 3)), [])
    with pytest.raises(ValueError, match="at least one seed"):
        noise_tiers(np.zeros((2, 0)), ["a", "b"])


def test_one_value_has_an_infinite_half_width() -> None:
    """One seed bounds nothing: infinite, never 0 * inf = NaN."""
    assert math.isinf(summarise([0.3]).half_width)
    assert summarise([0.1, 0.3]).half_width == pytest.approx(t_quantile(0.95, 1) * 0.1)
