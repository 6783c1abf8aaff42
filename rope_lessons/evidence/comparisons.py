"""What several seeds of a run show: summaries and paired comparisons.

:func:`summarise` reports the mean, standard deviation, standard error and range
over seeds, with Student's t interval (:func:`t_quantile`, from ``scipy.stats``);
:func:`metric_by_length` and :func:`accuracy_by_length` summarise one metric at
each evaluation length. :func:`compare_paired` compares two variants seed by seed
(the same seeds, so the seed-to-seed noise they share cancels), and
:func:`paired_differences`, :func:`compare_readings` and :func:`compare_extras`
do it for any reading; their intervals widen with the size of the family of
contrasts read together (the intro's evidence rule). :func:`difference_of_means`
compares two groups that share no seeds.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scipy import stats

from rope_lessons._checks import check_positive_int
from rope_lessons.evidence.runs import Metric, RunResult, metric


def t_quantile_975(degrees_of_freedom: int) -> float:
    """Student's t two-sided 95% quantile, :func:`t_quantile` at 0.95 (infinite for 0)."""
    return t_quantile(0.95, degrees_of_freedom)


@functools.lru_cache(maxsize=1024)
def t_quantile(level: float, degrees_of_freedom: int) -> float:
    """The two-sided ``level`` quantile of Student's t: ``P(|T| <= q) = level``.

    ``scipy.stats.t.isf`` at the upper tail ``(1 - level) / 2``: ``t.ppf`` at
    ``(1 + level) / 2``, without rounding that sum near 1. Any integer degrees of
    freedom, with no table that stops at 30. Every interval of the course
    (:attr:`Summary.half_width`, :meth:`PairedComparison.interval`, the stored
    sweeps' prediction intervals) takes its quantile from here. Infinite for 0
    degrees of freedom: one value bounds nothing.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if isinstance(degrees_of_freedom, bool) or not isinstance(degrees_of_freedom, int):
        raise TypeError(f"degrees_of_freedom must be an int, got {degrees_of_freedom!r}")
    if degrees_of_freedom < 1:
        return math.inf
    return float(stats.t.isf((1 - level) / 2, degrees_of_freedom))


@dataclass(frozen=True)
class Summary:
    """A statistic over seeds: mean, sample standard deviation, min, max, count."""

    mean: float
    std: float
    low: float
    high: float
    n: int

    @property
    def sem(self) -> float:
        """Standard error of the mean, ``std / sqrt(n)``."""
        return self.std / math.sqrt(self.n)

    @property
    def half_width(self) -> float:
        """Half-width of the 95% interval of the mean (:meth:`half_width_at` 0.95)."""
        return self.half_width_at(0.95)

    def half_width_at(self, level: float) -> float:
        """Half-width of the two-sided ``level`` interval of the mean (Student's t with
        ``n - 1`` df); infinite for one value, which bounds nothing."""
        if self.n < 2:
            return math.inf
        return t_quantile(level, self.n - 1) * self.sem

    def __str__(self) -> str:
        return (
            f"{self.mean:.3f} (s.d. {self.std:.3f}) [{self.low:.3f}, {self.high:.3f}] (n={self.n})"
        )


def summarise(values: Sequence[float]) -> Summary:
    """Mean, sample standard deviation (0 for one value), minimum and maximum."""
    if not values:
        raise ValueError("summarise needs at least one value")
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(statistics.fmean(values), std, min(values), max(values), len(values))


@dataclass(frozen=True)
class PairedComparison:
    """Two variants compared seed by seed: ``second - first`` for each shared seed.

    Attributes:
        first, second: the two labels.
        seeds: the seeds both were run with, in order.
        differences: ``value(second) - value(first)`` for each seed.
        summary: :func:`summarise` of the differences (``summary.sem`` is the
            paired standard error).
        wins: seeds where ``second`` is larger (better for an accuracy,
            worse for a loss: see :attr:`better`).
        metric: what was compared, e.g. ``"loss at length 64"``.
        lower_is_better: which direction is better; None if not known.
        unit: what the pairs are, in words (``"seeds"``; ``"passages"`` when one
            model reads several texts).
    """

    first: str
    second: str
    seeds: tuple[int, ...]
    differences: tuple[float, ...]
    summary: Summary
    wins: int
    metric: str = "value"
    lower_is_better: bool | None = None
    unit: str = "seeds"

    @property
    def half_width(self) -> float:
        """Half-width of the paired 95% interval of the mean difference (Student's t)."""
        return self.summary.half_width

    @property
    def resolved(self) -> bool:
        """The paired 95% interval excludes zero (:meth:`resolved_for` one comparison)."""
        return self.resolved_for()

    @property
    def better(self) -> int | None:
        """Seeds where ``second`` is better than ``first``; None if the direction is unknown."""
        if self.lower_is_better is None:
            return None
        return sum((d < 0) if self.lower_is_better else (d > 0) for d in self.differences)

    def interval(self, family: int = 1) -> tuple[float, float]:
        """The paired interval of the mean difference, 95% for a ``family`` of comparisons
        read together: each at ``1 - 0.05 / family`` (Bonferroni), so that all of them hold
        at once with probability 95% or more. One seed bounds nothing: infinite."""
        check_positive_int(family, "family")
        s = self.summary
        half = s.half_width_at(1 - 0.05 / family)
        return s.mean - half, s.mean + half

    def resolved_for(self, family: int = 1) -> bool:
        """The interval of :meth:`interval` for a ``family`` of comparisons excludes zero."""
        low, high = self.interval(family)
        return low > 0 or high < 0

    def verdict(self, family: int = 1) -> str:
        """The course's evidence rule in words: the mean difference, its interval
        (:meth:`interval`), the seeds on each side, and "resolved" when the interval
        excludes zero. "On every seed" is only ever said beside such an interval."""
        low, high = self.interval(family)
        s = self.summary
        level = "95%" if family == 1 else f"95% for {family} comparisons"
        side = (
            f"{self.second} better on {self.better} of {s.n} {self.unit}"
            if self.better is not None
            else f"larger on {self.wins} of {s.n} {self.unit}"
        )
        words = "resolved" if self.resolved_for(family) else "not resolved"
        return f"{s.mean:+.3f} [{low:+.3f}, {high:+.3f}] ({level}), {side}: {words}"

    def report(self, family: int = 1) -> str:
        """One line: what was compared, which way is better, and :meth:`verdict`."""
        direction = {None: "", True: " (lower is better)", False: " (higher is better)"}
        return (
            f"{self.second} - {self.first}, {self.metric}{direction[self.lower_is_better]}: "
            f"{self.verdict(family)}"
        )

    def __str__(self) -> str:
        return self.report()


def compare_paired(
    first: Sequence[RunResult],
    second: Sequence[RunResult],
    value: Callable[[RunResult], float],
    *,
    name: str | None = None,
    lower_is_better: bool | None = None,
) -> PairedComparison:
    """Compare two variants over the same seeds (e.g. ``value=metric(64, "loss")``).

    Pairing by seed removes what the seeds share (initialisation, data order),
    so the standard error of the differences is the honest spread.

    Args:
        first, second: the results of the two variants, one per seed.
        value: the number compared; a :class:`~.Metric` (from :func:`~.metric`)
            names itself and knows which direction is better.
        name, lower_is_better: say what ``value`` is and which way is better
            when it is another function (they override a :class:`~.Metric`'s).

    Raises:
        ValueError: if the two lists do not hold the same seeds, once each.
    """
    if isinstance(value, Metric):
        name = str(value) if name is None else name
        lower_is_better = value.lower_is_better if lower_is_better is None else lower_is_better
    by_seed = [{r.seed: r for r in results} for results in (first, second)]
    for results, indexed in zip((first, second), by_seed, strict=True):
        if len(indexed) != len(results) or not results:
            raise ValueError("each variant must hold at least one result, one per seed")
    if by_seed[0].keys() != by_seed[1].keys():
        raise ValueError(
            "the variants were run with different seeds: "
            f"{sorted(by_seed[0])} vs {sorted(by_seed[1])}"
        )
    seeds = tuple(sorted(by_seed[0]))
    return paired_differences(
        [value(by_seed[1][s]) - value(by_seed[0][s]) for s in seeds],
        names=(first[0].label, second[0].label),
        seeds=seeds,
        metric="value" if name is None else name,
        lower_is_better=lower_is_better,
    )


def paired_differences(
    differences: Sequence[float],
    *,
    names: tuple[str, str],
    seeds: Sequence[int] | None = None,
    metric: str = "value",
    lower_is_better: bool | None = None,
    unit: str = "seeds",
) -> PairedComparison:
    """A :class:`PairedComparison` from differences already paired: ``second - first``
    for each seed (or passage, or draw: ``unit``). :func:`compare_paired` and
    :func:`compare_readings` build theirs here.

    Args:
        differences: one per pair, at least one.
        names: ``(first, second)``.
        seeds: the pairs' seeds; default ``0, 1, ...``.
        metric, lower_is_better, unit: as in :class:`PairedComparison`.
    """
    values = tuple(float(d) for d in differences)
    if not values:
        raise ValueError("differences must hold at least one value")
    pairs = tuple(range(len(values))) if seeds is None else tuple(seeds)
    if len(pairs) != len(values):
        raise ValueError(f"{len(values)} differences but {len(pairs)} seeds")
    return PairedComparison(
        first=names[0],
        second=names[1],
        seeds=pairs,
        differences=values,
        summary=summarise(values),
        wins=sum(d > 0 for d in values),
        metric=metric,
        lower_is_better=lower_is_better,
        unit=unit,
    )


def compare_readings(
    results: Sequence[RunResult],
    first: Callable[[RunResult], float],
    second: Callable[[RunResult], float],
    *,
    names: tuple[str, str] = ("first", "second"),
    metric: str = "value",
    lower_is_better: bool | None = True,
) -> PairedComparison:
    """``second(r) - first(r)`` seed by seed, within one variant's results: two
    readings of the same trained models (two ablations, two extension methods on
    the same weights).

    Args:
        results: one result per seed.
        first, second: the two readings of a result.
        names: how the two readings are called in :meth:`PairedComparison.report`.
        metric, lower_is_better: what the readings are and which way is better.

    Raises:
        ValueError: if a seed appears twice, or no result is given.
    """
    seeds = tuple(r.seed for r in results)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"results must hold each seed once, got seeds {list(seeds)}")
    return paired_differences(
        [second(r) - first(r) for r in results],
        names=names,
        seeds=seeds,
        metric=metric,
        lower_is_better=lower_is_better,
    )


def compare_extras(
    results: Sequence[RunResult], first: str, second: str, *, lower_is_better: bool = True
) -> PairedComparison:
    """``extra[second] - extra[first]`` seed by seed, within one variant's results
    (:func:`compare_readings` of two stored extras).

    Raises:
        ValueError: if a seed appears twice, or no result is given.
    """
    return compare_readings(
        results,
        lambda r: r.extra[first],
        lambda r: r.extra[second],
        names=(first, second),
        metric="extra",
        lower_is_better=lower_is_better,
    )


@dataclass(frozen=True)
class Difference:
    """A difference of means between two independent groups (e.g. two models trained from
    scratch), with the half-width of its 95% interval (Welch's standard error, Student's t
    with the smaller group's degrees of freedom: conservative)."""

    mean: float
    half_width: float

    @property
    def resolved(self) -> bool:
        """The 95% interval excludes zero."""
        return abs(self.mean) > self.half_width

    def __str__(self) -> str:
        return f"{self.mean:+.3f} ± {self.half_width:.3f}"


def difference_of_means(first: Sequence[float], second: Sequence[float]) -> Difference:
    """``mean(second) - mean(first)`` for two independent groups (see :class:`Difference`)."""
    a, b = summarise(first), summarise(second)
    error = math.sqrt(a.sem**2 + b.sem**2)
    return Difference(b.mean - a.mean, t_quantile_975(min(a.n, b.n) - 1) * error)


def metric_by_length(results: Sequence[RunResult], name: str = "accuracy") -> dict[int, Summary]:
    """One held-out metric at each evaluation length, summarised over the seeds of one run."""
    lengths = sorted({length for r in results for length in r.metrics})
    return {
        length: summarise([metric(length, name)(r) for r in results if length in r.metrics])
        for length in lengths
    }


def accuracy_by_length(results: Sequence[RunResult]) -> dict[int, Summary]:
    """Accuracy at each evaluation length, summarised over the seeds of one run."""
    return metric_by_length(results, "accuracy")
