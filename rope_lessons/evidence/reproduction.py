"""A stored sweep's results, what they show, and whether a re-run reproduces them.

:class:`StoredSweep` holds the verified results of a sweep (read by
:func:`rope_lessons.sweeps.load_sweep`) and summarises them: per run and
length, the seeds' values, :class:`Convergence` over the last fifth of
training, and :func:`seeds_apart`.

Reproduction on any CPU (:meth:`StoredSweep.check`). PyTorch picks its CPU
kernels by vector instruction set (``ATEN_CPU_CAPABILITY``), so two machines
round differently, and training amplifies the difference: after a few hundred
steps a re-run is, in effect, another seed. A re-run is therefore compared in
two parts:

* its deterministic prefix: the training losses of the first
  :data:`~rope_lessons.evidence.runs.PREFIX_STEPS` steps and the held-out
  evaluation after them, against the stored run of the same seed, within
  :data:`PREFIX_TOLERANCE` (different instruction sets agree there to about
  1e-6; a changed rotation sign, learning rate or data stream moves them by
  1e-3 or more);
* its later numbers: every held-out metric at its last checkpoint must lie in
  the 99.9% prediction interval of the stored seeds at that checkpoint
  (:func:`prediction_interval`), never narrower than :data:`RANGE_FLOOR`.

Every results file also holds a *reference*: the cheapest (run, seed) trained
on the CPU with one thread, whose prefix ``tests/test_sweeps.py`` re-trains.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rope_lessons._checks import check_choice
from rope_lessons.evidence.comparisons import Summary, metric_by_length, t_quantile
from rope_lessons.evidence.runs import (
    CHECKPOINTS,
    METRIC_NAMES,
    PREFIX_STEPS,
    RunResult,
    checkpoint_step,
)
from rope_lessons.evidence.sweep import Sweep, _metric_name
from rope_lessons.evidence.training import Metrics

# Prefix agreement: the largest absolute difference allowed in a training loss of the
# first PREFIX_STEPS steps, and in the held-out loss after them. Measured across the
# instruction sets default, avx2 and avx512 (one thread): at most 7.2e-7 up to step 25
# (3.1e-5 by step 50, 4e-3 by step 100), so 1e-4 leaves a margin of 100 and is still
# ten times below the smallest real change in tests/test_sweeps.py.
PREFIX_TOLERANCE = 1e-4
# Held-out accuracies after the prefix may differ by a prediction or two that sit on a
# tie between two logits: 2e-3 is two predictions in 1024 (and 1e-3 of the smallest
# evaluation set of a stored sweep, 2 batches of 256 sequences).
PREFIX_ACCURACY_TOLERANCE = 2e-3
# The prediction interval is never narrower than this on either side (seeds that all
# score 1.000, or agree to the third decimal, leave no spread to speak of).
RANGE_FLOOR: dict[str, float] = {
    "loss": 0.02,
    "accuracy": 0.02,
    "answer_accuracy": 0.02,
    "neither": 0.02,
}
# A change over the last fifth of training smaller than this is no movement, whatever the
# seeds' spread (a loss near 0 shrinks by 1e-4 while its seeds agree to 1e-5).
CONVERGENCE_FLOOR = 0.005


def prediction_interval(values: Sequence[float], floor: float) -> tuple[float, float]:
    """Where a new seed's value lies with 99.9% probability, from the stored seeds' values.

    ``mean ± t · s · sqrt(1 + 1/n)`` (Student's t, ``n - 1`` degrees of freedom,
    for normally distributed values), widened to at least ``± floor`` around the
    stored range. With one value only the floor remains.
    """
    if not values:
        raise ValueError("prediction_interval needs at least one value")
    n = len(values)
    low, high = min(values), max(values)
    if n == 1:
        return low - floor, high + floor
    mean = statistics.fmean(values)
    t = t_quantile(0.999, n - 1)
    half = t * statistics.stdev(values) * math.sqrt(1 + 1 / n)
    return min(mean - half, low - floor), max(mean + half, high + floor)


@dataclass(frozen=True)
class Convergence:
    """Whether a held-out measure has stopped moving: over the last 1/:data:`CHECKPOINTS`
    of the steps (the last 20%), its mean over seeds changes by no more than the
    seeds' standard deviation at the end (or than :data:`CONVERGENCE_FLOOR`, if larger),
    and no seed ends apart from the others. A seed stuck on a plateau the others left
    changes little and widens the spread, so the mean alone would call it converged;
    it shows as a final value outside the 99.9% prediction interval of the other seeds
    (:func:`prediction_interval`).

    Attributes:
        label, length, name: which run, evaluation length and metric.
        steps: the two checkpoints compared, e.g. ``(240, 300)``.
        change: mean over seeds at the last minus at the earlier checkpoint.
        spread: sample standard deviation over seeds at the last checkpoint.
        n: number of seeds.
        apart: the seeds whose final value lies outside the prediction interval of the
            others' (checked with three seeds or more).
    """

    label: str
    length: int
    name: str
    steps: tuple[int, int]
    change: float
    spread: float
    n: int
    apart: tuple[int, ...] = ()

    @property
    def converged(self) -> bool:
        """``|change| <= max(spread, CONVERGENCE_FLOOR)`` and no seed apart."""
        return abs(self.change) <= max(self.spread, CONVERGENCE_FLOOR) and not self.apart

    def __str__(self) -> str:
        if self.apart:
            verdict = f"SEED {', '.join(map(str, self.apart))} APART FROM THE OTHERS"
        else:
            verdict = "converged" if self.converged else "STILL MOVING"
        return (
            f"{self.label!r} {self.name} at length {self.length}, steps {self.steps[0]} -> "
            f"{self.steps[1]}: change {self.change:+.3f}, seed spread {self.spread:.3f} "
            f"(n={self.n}): {verdict}"
        )


def seeds_apart(values: dict[int, float], floor: float) -> tuple[int, ...]:
    """The seeds whose value lies outside the 99.9% prediction interval of the other seeds'
    values (:func:`prediction_interval`); none with fewer than three seeds."""
    if len(values) < 3:
        return ()
    apart = []
    for seed, value in values.items():
        others = [v for s, v in values.items() if s != seed]
        low, high = prediction_interval(others, floor)
        if not low <= value <= high:
            apart.append(seed)
    return tuple(apart)


@dataclass(frozen=True)
class Reproduction:
    """How a re-run compares with the stored runs (see :meth:`StoredSweep.check`).

    Attributes:
        label, seed: the re-run.
        steps: training steps the re-run took (may be fewer than the run's).
        prefix_steps: how many of its first training losses were compared with
            the stored run of the same seed.
        prefix_gap: the largest difference among them (None: that seed is not stored).
        prefix_eval_gaps: at the end of the prefix, the largest difference of
            the held-out losses and of the held-out accuracies (None: not reached).
        checkpoint: the last checkpoint whose held-out numbers were compared
            with the stored seeds' prediction intervals (None: none reached
            beyond the prefix).
        outside: the numbers outside their interval, described.
    """

    label: str
    seed: int
    steps: int
    prefix_steps: int
    prefix_gap: float | None
    prefix_eval_gaps: tuple[float, float] | None
    checkpoint: int | None
    outside: tuple[str, ...]

    @property
    def prefix_matches(self) -> bool:
        """Whether every compared prefix number is within tolerance."""
        if self.prefix_gap is not None and self.prefix_gap > PREFIX_TOLERANCE:
            return False
        if self.prefix_eval_gaps is None:
            return True
        loss_gap, accuracy_gap = self.prefix_eval_gaps
        return loss_gap <= PREFIX_TOLERANCE and accuracy_gap <= PREFIX_ACCURACY_TOLERANCE

    @property
    def compared(self) -> bool:
        """Whether anything was compared: a stored seed's prefix, or a later checkpoint."""
        return self.prefix_gap is not None or self.checkpoint is not None

    @property
    def reproduces(self) -> bool:
        """The verdict: something was compared, the prefix matches and no later number
        is outside its interval."""
        return self.compared and self.prefix_matches and not self.outside

    def __str__(self) -> str:
        lines = [f"{self.label!r}, seed {self.seed}, {self.steps} steps:"]
        if self.prefix_gap is None:
            lines.append("  prefix: seed not stored, not compared")
        else:
            verdict = "matches" if self.prefix_matches else "DIFFERS FROM"
            at = "" if self.prefix_eval_gaps is None else " and the held-out numbers after it"
            lines.append(
                f"  first {self.prefix_steps} steps{at}: {verdict} the stored run "
                f"(tolerance {PREFIX_TOLERANCE:g})"
            )
        if self.checkpoint is None:
            lines.append("  no checkpoint past the prefix reached: spread not compared")
        elif self.outside:
            lines.append(f"  step {self.checkpoint}: OUTSIDE the stored seeds' range:")
            lines.extend(f"    {item}" for item in self.outside)
        else:
            lines.append(
                f"  step {self.checkpoint}: every held-out number within the stored seeds' "
                "99.9% prediction interval"
            )
        if not self.compared:
            lines.append("  nothing to compare: not reproduced")
        lines.append(f"  reproduces: {self.reproduces}")
        return "\n".join(lines)


def _metric_gaps(first: dict[int, Metrics], second: dict[int, Metrics]) -> tuple[float, float]:
    """The largest differences of held-out losses and of accuracies (any kind) over lengths."""
    if first.keys() != second.keys():
        raise ValueError(f"evaluated at lengths {sorted(first)} and {sorted(second)}")
    loss_gap = accuracy_gap = 0.0
    for length, metrics in first.items():
        theirs = dataclasses.asdict(second[length])
        for name, value in dataclasses.asdict(metrics).items():
            other = theirs[name]
            if value is None or other is None:
                continue
            if name == "loss":
                loss_gap = max(loss_gap, abs(value - other))
            else:
                accuracy_gap = max(accuracy_gap, abs(value - other))
    return loss_gap, accuracy_gap


@dataclass(frozen=True)
class StoredSweep:
    """A verified results file.

    Attributes:
        sweep: the sweep as the code defines it today.
        stored: every stored result.
        records: per result (same order), how it was made: command, device,
            threads, library versions, date, git commit.
        reference: the cheapest (run, seed) trained on the CPU with one
            thread, the one the reproduction test trains again.
        path: where the file was read from.
    """

    sweep: Sweep
    stored: tuple[RunResult, ...]
    records: tuple[dict[str, Any], ...]
    reference: RunResult
    path: str

    def results(self, label: str) -> list[RunResult]:
        """The stored results of one run, ordered by seed."""
        self.sweep.run(label)  # refuses an unknown label
        return sorted((r for r in self.stored if r.label == label), key=lambda r: r.seed)

    def result(self, label: str, seed: int) -> RunResult:
        """The stored result of one run and seed."""
        for r in self.results(label):
            if r.seed == seed:
                return r
        raise ValueError(f"sweep {self.sweep.name!r} has no stored {label!r} with seed {seed}")

    def check(self, result: RunResult) -> Reproduction:
        """Compare a re-run (complete or stopped early) with the stored runs.

        The deterministic prefix is compared with the stored run of the same
        seed; the held-out numbers at the re-run's last checkpoint past the
        prefix with the 99.9% prediction interval of every stored seed there.
        A complete re-run without checkpoints (``run_once(...,
        checkpoints=False)``, cheaper) is compared by its training losses and
        its final numbers.

        Raises:
            ValueError: if the label is unknown or the re-run took more steps
                than the run defines.
        """
        run = self.sweep.run(result.label)
        steps = len(result.losses)
        if steps > run.steps:
            raise ValueError(f"{result.label!r} took {steps} steps; the run defines {run.steps}")
        stored = {r.seed: r for r in self.results(result.label)}
        prefix_end = min(PREFIX_STEPS, run.steps)  # the prefix's checkpoint
        prefix_steps = min(PREFIX_STEPS, steps)
        prefix_gap = prefix_eval_gaps = None
        same_seed = stored.get(result.seed)
        if same_seed is not None:
            pairs = zip(result.losses[:prefix_steps], same_seed.losses, strict=False)
            prefix_gap = max((abs(a - b) for a, b in pairs), default=0.0)
            if prefix_end in result.checkpoints:
                prefix_eval_gaps = _metric_gaps(
                    result.checkpoints[prefix_end], same_seed.checkpoints[prefix_end]
                )
        evaluations = result.evaluations  # a complete run's final metrics count as its last
        later = [s for s in run.checkpoint_steps if s in evaluations and s > prefix_end]
        checkpoint = later[-1] if later else None
        outside: list[str] = []
        if checkpoint is not None:
            for length, metrics in evaluations[checkpoint].items():
                for name, value in dataclasses.asdict(metrics).items():
                    if value is None:
                        continue
                    values = [
                        getattr(r.checkpoints[checkpoint][length], name) for r in stored.values()
                    ]
                    low, high = prediction_interval(values, RANGE_FLOOR[name])
                    if not low <= value <= high:
                        outside.append(
                            f"length {length} {name} {value:.3f} outside [{low:.3f}, {high:.3f}]"
                        )
        return Reproduction(
            label=result.label,
            seed=result.seed,
            steps=steps,
            prefix_steps=prefix_steps,
            prefix_gap=prefix_gap,
            prefix_eval_gaps=prefix_eval_gaps,
            checkpoint=checkpoint,
            outside=tuple(outside),
        )

    def convergence(self, label: str, length: int, name: str = "loss") -> Convergence:
        """Has one held-out measure of one run stopped moving (see :class:`Convergence`)?"""
        run = self.sweep.run(label)
        check_choice(name, "name", METRIC_NAMES)
        if length not in run.eval_lens:
            raise ValueError(f"{label!r} is evaluated at {list(run.eval_lens)}, not {length}")
        earlier = checkpoint_step(run.steps, CHECKPOINTS - 1)
        results = self.results(label)
        before, after = (
            [getattr(r.checkpoints[step][length], name) for r in results]
            for step in (earlier, run.steps)
        )
        if None in before or None in after:
            raise ValueError(f"{label!r} has no {name!r} (its task has no answer set)")
        return Convergence(
            label=label,
            length=length,
            name=name,
            steps=(earlier, run.steps),
            change=statistics.fmean(after) - statistics.fmean(before),
            spread=statistics.stdev(after) if len(after) > 1 else 0.0,
            n=len(after),
            apart=seeds_apart(
                {r.seed: v for r, v in zip(results, after, strict=True)}, RANGE_FLOOR[name]
            ),
        )

    @property
    def complete(self) -> bool:
        """Whether every run is stored for every seed of the sweep."""
        done = {(r.label, r.seed) for r in self.stored}
        return all((label, s) in done for label in self.sweep.labels for s in self.sweep.seeds)

    def table(self, name: str | None = None) -> dict[str, dict[int, Summary]]:
        """Each variant's held-out metric at each evaluation length, over its stored seeds.

        Args:
            name: a metric of :data:`~rope_lessons.evidence.runs.METRIC_NAMES`; default
                each run's own (:meth:`Run.metric <rope_lessons.evidence.runs.Run.metric>`:
                loss for a corpus, accuracy for a task).

        Returns:
            ``{label: {length: Summary}}`` in the sweep's order, plain dicts (no pandas);
            variants with no stored result are left out.
        """
        table: dict[str, dict[int, Summary]] = {}
        for run in self.sweep.runs:
            results = self.results(run.label)
            if results:
                table[run.label] = metric_by_length(results, _metric_name(run, name))
        return table

    def format_table(self, name: str | None = None) -> str:
        """:meth:`table` as plain text: a row per variant, a column per evaluation length,
        each cell the mean and, in brackets, the seeds' standard deviation (3 decimals)."""
        table = self.table(name)
        lengths = sorted({length for row in table.values() for length in row})
        width = max([len("variant"), *(len(label) for label in table)])
        metric_names = {_metric_name(run, name) for run in self.sweep.runs if run.label in table}
        lines = [
            f"{self.sweep.name}: {', '.join(sorted(metric_names))}, mean (s.d.) over the stored "
            "seeds",
            f"{'variant':<{width}}" + "".join(f"{f'length {n}':>20}" for n in lengths),
        ]
        for label, row in table.items():
            cells = [
                f"{row[n].mean:.3f} (s.d. {row[n].std:.3f})" if n in row else "-" for n in lengths
            ]
            lines.append(f"{label:<{width}}" + "".join(f"{cell:>20}" for cell in cells))
        return "\n".join(lines)

    def describe(self) -> str:
        """A few lines: what, how many seeds, on which device, when, from which commit."""
        devices = sorted({f"{r['device']} ({r['cpu_capability']})" for r in self.records})
        dates = sorted(r["date"][:10] for r in self.records)
        commits = sorted({str(r["git_commit"])[:10] for r in self.records})
        seeds = sorted({r.seed for r in self.stored})
        return (
            f"stored sweep {self.sweep.name} v{self.sweep.version}: {len(self.stored)} runs "
            f"({len(self.sweep.runs)} variants x seeds {seeds}); device {', '.join(devices)}; "
            f"{dates[0]} to {dates[-1]}; commit {', '.join(commits)}"
        )
