"""Stored sweeps: multi-seed experiments trained by a script, stored as package data, verified.

A notebook that cannot afford all its seeds trains one live and loads the
rest from a results file that this module wrote. A sweep is a module
``rope_lessons/sweeps/<name>.py`` that defines ``SWEEP = Sweep(...)``: a name,
a version, a description, the runs (:class:`~rope_lessons.experiments.Run`)
and the seeds. Modules in that package are discovered automatically.

Command line (from the repository root)::

    python -m rope_lessons.sweep --list
    python -m rope_lessons.sweep ch03_order [--seeds 0 1 2] [--device cpu] [--restart]
    python -m rope_lessons.sweep ch03_order --dry-run [--throughput TOKENS_PER_S]
    python -m rope_lessons.sweep ch03_order --labels
    python -m rope_lessons.sweep ch03_order --only "rope" [--seeds 0]
    python -m rope_lessons.sweep ch03_order --merge-from DIR

``--results-dir DIR`` writes and reads the results in ``DIR`` instead of the
package's folder; with it, two processes can train different seeds at once,
and ``--merge-from DIR`` then adds the runs one of them stored to the other's
file (:func:`merge_results`). ``--dry-run`` prints the runs, the seeds, the (run, seed)
pairs not stored yet and an estimated time (:func:`dry_run`), training only a
few steps to time this machine; ``--labels`` lists the variants.

trains every (run, seed) not yet stored, with a progress bar, and writes each
finished run at once to ``rope_lessons/results/<name>.json``, so an
interrupted sweep resumes where it stopped. Each result records the command,
device, CPU threads, library versions, date and git commit; the file records
the sweep's version and the configuration of every run, and a SHA-256 of its
content.

:func:`load_sweep` reads a results file and refuses it when the hash does not
match (a hand-edited file), when its version differs from the code's, or when
the code now describes a run differently (a change of meaning without a
version bump; numbers are compared to a relative 1e-9, so that a frequency
recomputed with other rounding is still the same run).

Reproduction on any CPU (:meth:`StoredSweep.check`). PyTorch picks its CPU
kernels by vector instruction set (``ATEN_CPU_CAPABILITY``), so two machines
round differently, and training amplifies the difference: after a few hundred
steps a re-run is, in effect, another seed. A re-run is therefore compared in
two parts:

* its deterministic prefix: the training losses of the first
  :data:`~rope_lessons.experiments.PREFIX_STEPS` steps and the held-out
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

import argparse
import dataclasses
import datetime
import hashlib
import importlib
import json
import math
import os
import pkgutil
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rope_lessons._checks import check_choice
from rope_lessons.experiments import (
    CHECKPOINTS,
    EVAL_BATCH_SIZE,
    METRIC_NAMES,
    PREFIX_STEPS,
    Run,
    RunResult,
    Summary,
    checkpoint_step,
    metric_by_length,
    run_once,
    t_quantile,
)
from rope_lessons.runtime import check_device, choose_threads
from rope_lessons.training import Metrics

FORMAT = 3
SWEEPS_PACKAGE = "rope_lessons.sweeps"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
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
CONFIG_RELATIVE_TOLERANCE = 1e-9
_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Sweep:
    """A named, versioned experiment: every run trained with every seed.

    Attributes:
        name: the module name in :mod:`rope_lessons.sweeps`, e.g. ``"ch03_order"``.
        version: bump it whenever a run changes meaning (stored results of
            another version are refused).
        description: one or two sentences: what it measures and for which chapter.
        runs: the variants, with unique labels.
        seeds: the seeds every run is trained with.
    """

    name: str
    version: int
    description: str
    runs: tuple[Run[Any], ...]
    seeds: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"name must be a lower-case identifier, got {self.name!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"version must be an int >= 1, got {self.version!r}")
        if not isinstance(self.runs, tuple) or not self.runs:
            raise TypeError("runs must be a non-empty tuple of Run")
        for run in self.runs:
            if not isinstance(run, Run):
                raise TypeError(f"runs must hold Run objects, got {type(run).__name__}")
        labels = [run.label for run in self.runs]
        if len(set(labels)) != len(labels):
            raise ValueError(f"run labels must be unique within a sweep, got {labels}")
        if not isinstance(self.seeds, tuple) or not self.seeds:
            raise TypeError("seeds must be a non-empty tuple of ints")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct, got {self.seeds}")

    @property
    def labels(self) -> list[str]:
        """The run labels, in order."""
        return [run.label for run in self.runs]

    def run(self, label: str) -> Run[Any]:
        """The run with this label."""
        for run in self.runs:
            if run.label == label:
                return run
        raise ValueError(f"sweep {self.name!r} has no run labelled {label!r}; it has {self.labels}")

    def reference(self) -> tuple[Run[Any], int]:
        """The cheapest run (see :attr:`~rope_lessons.experiments.Run.cost`) with the lowest
        seed: what the test re-trains."""
        return min(self.runs, key=lambda run: run.cost), min(self.seeds)

    def config(self) -> dict[str, Any]:
        """The configuration of every run, as stored (JSON values)."""
        described = {run.label: run.describe() for run in self.runs}
        loaded: dict[str, Any] = json.loads(json.dumps(described))
        return loaded


def _metric_name(run: Run[Any], name: str | None) -> str:
    """``name``, or the metric ``run`` reads by default (loss for a corpus, accuracy for a task)."""
    return name if name is not None else run.metric(run.eval_lens[0]).name


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


def same_config(first: Any, second: Any, rel: float = CONFIG_RELATIVE_TOLERANCE) -> bool:
    """Whether two stored configurations (JSON values) are equal, numbers to ``rel``.

    Floats recomputed on another machine (a frequency ladder, say) may differ in
    their last bits; anything else must be equal.
    """
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(
            same_config(first[key], second[key], rel) for key in first
        )
    if isinstance(first, list) and isinstance(second, list):
        return len(first) == len(second) and all(
            same_config(a, b, rel) for a, b in zip(first, second, strict=True)
        )
    numbers = (int, float)
    if (
        isinstance(first, numbers)
        and isinstance(second, numbers)
        and not isinstance(first, bool)
        and not isinstance(second, bool)
    ):
        return math.isclose(first, second, rel_tol=rel, abs_tol=0.0)
    return bool(first == second) and type(first) is type(second)


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


def available() -> list[str]:
    """Names of the sweeps defined in :mod:`rope_lessons.sweeps`."""
    package = importlib.import_module(SWEEPS_PACKAGE)
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg)


def get_sweep(name: str) -> Sweep:
    """The sweep defined by ``rope_lessons/sweeps/<name>.py``.

    Raises:
        ValueError: if there is no such sweep, or its module does not define
            ``SWEEP`` as a :class:`Sweep` of that name.
    """
    names = available()
    if name not in names:
        raise ValueError(f"no sweep named {name!r}; the sweeps are {names}")
    module = importlib.import_module(f"{SWEEPS_PACKAGE}.{name}")
    sweep = getattr(module, "SWEEP", None)
    if not isinstance(sweep, Sweep):
        raise ValueError(f"{SWEEPS_PACKAGE}.{name} must define SWEEP = Sweep(...)")
    if sweep.name != name:
        raise ValueError(f"{SWEEPS_PACKAGE}.{name} defines a sweep named {sweep.name!r}")
    return sweep


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
            name: a metric of :data:`~rope_lessons.experiments.METRIC_NAMES`; default
                each run's own (:meth:`Run.metric <rope_lessons.experiments.Run.metric>`:
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
        each cell the mean ± the seeds' standard deviation (3 decimals)."""
        table = self.table(name)
        lengths = sorted({length for row in table.values() for length in row})
        width = max([len("variant"), *(len(label) for label in table)])
        metric_names = {_metric_name(run, name) for run in self.sweep.runs if run.label in table}
        lines = [
            f"{self.sweep.name}: {', '.join(sorted(metric_names))}, mean ± standard deviation "
            "over the stored seeds",
            f"{'variant':<{width}}" + "".join(f"{f'length {n}':>17}" for n in lengths),
        ]
        for label, row in table.items():
            cells = [f"{row[n].mean:.3f} ± {row[n].std:.3f}" if n in row else "-" for n in lengths]
            lines.append(f"{label:<{width}}" + "".join(f"{cell:>17}" for cell in cells))
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


def content_hash(content: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``content`` without its own ``sha256`` entry."""
    body = {key: value for key, value in content.items() if key != "sha256"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def results_path(name: str, results_dir: Path | None = None) -> Path:
    """Where a sweep's results file is written (the package's ``results`` folder by default)."""
    return (RESULTS_DIR if results_dir is None else Path(results_dir)) / f"{name}.json"


def _read(sweep: Sweep, results_dir: Path | None) -> tuple[dict[str, Any], str] | None:
    """The verified content of the sweep's results file and its location, or None if absent."""
    if results_dir is None:
        packaged = resources.files("rope_lessons").joinpath(f"results/{sweep.name}.json")
        if not packaged.is_file():
            return None
        text, where = packaged.read_text(encoding="utf-8"), str(packaged)
    else:
        path = results_path(sweep.name, results_dir)
        if not path.is_file():
            return None
        text, where = path.read_text(encoding="utf-8"), str(path)
    content: dict[str, Any] = json.loads(text)
    if content.get("format") != FORMAT:
        raise ValueError(f"{where}: unknown format {content.get('format')!r} (expected {FORMAT})")
    if content.get("sha256") != content_hash(content):
        raise ValueError(
            f"{where}: the content does not match its SHA-256: the file was edited by hand or "
            f"damaged. Never edit results; re-run `python -m rope_lessons.sweep {sweep.name}`."
        )
    if content["name"] != sweep.name:
        raise ValueError(f"{where} holds sweep {content['name']!r}, not {sweep.name!r}")
    if content["version"] != sweep.version:
        raise ValueError(
            f"{where} was made by version {content['version']} of sweep {sweep.name!r}, the code "
            f"is version {sweep.version}: re-run `python -m rope_lessons.sweep {sweep.name} "
            "--restart`."
        )
    if not same_config(content["config"], sweep.config()):
        changed = sorted(
            label
            for label in set(content["config"]) | set(sweep.config())
            if not same_config(content["config"].get(label), sweep.config().get(label))
        )
        raise ValueError(
            f"{where}: the code now defines runs {changed} differently from the stored ones, "
            f"at the same version {sweep.version}. Bump Sweep.version and re-run the sweep."
        )
    return content, where


def load_sweep(sweep: str | Sweep, results_dir: Path | None = None) -> StoredSweep:
    """Read and verify a sweep's stored results.

    Args:
        sweep: a sweep name (see :func:`available`) or a :class:`Sweep`.
        results_dir: a folder to read from instead of the installed package's.

    Raises:
        ValueError: if there are no results, the file was edited (hash), or it
            was made by another version or another configuration of the sweep.
    """
    definition = get_sweep(sweep) if isinstance(sweep, str) else sweep
    found = _read(definition, results_dir)
    if found is None or found[0]["reference"] is None:
        raise ValueError(
            f"no stored results for sweep {definition.name!r}: run "
            f"`python -m rope_lessons.sweep {definition.name}`"
        )
    content, where = found
    return StoredSweep(
        sweep=definition,
        stored=tuple(RunResult.from_json(entry["result"]) for entry in content["results"]),
        records=tuple(entry["record"] for entry in content["results"]),
        reference=RunResult.from_json(content["reference"]["result"]),
        path=where,
    )


def git_commit() -> str | None:
    """The checked-out commit of the package's repository, or None outside a git checkout.

    ``+dirty`` is appended when the package's code (``rope_lessons/`` except its
    results) differs from the commit, untracked files included.
    """
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            # Only the package's code decides the results: results files being written
            # and edits outside rope_lessons/ (notebooks, tests) do not make it dirty.
            ["git", "status", "--porcelain", "--", "rope_lessons", ":!rope_lessons/results"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if status else "")


def processor_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def record(device: torch.device, command: str) -> dict[str, Any]:
    """How a result was made: command, device, processor and its vector instruction set
    (the one PyTorch's CPU kernels use), threads, versions, date, commit."""
    return {
        "command": command,
        "device": str(device),
        "device_name": (
            torch.cuda.get_device_name(device) if device.type == "cuda" else processor_name()
        ),
        "processor": processor_name(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "system": platform.system(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
    }


def write_results(path: Path, content: dict[str, Any]) -> None:
    """Write the file with its hash, atomically (a crash never leaves half a file)."""
    content["sha256"] = content_hash(content)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(content, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def run_sweep(
    sweep: Sweep,
    *,
    seeds: Sequence[int] | None = None,
    device: torch.device | str = "cpu",
    results_dir: Path | None = None,
    restart: bool = False,
    progress: bool = True,
    command: str | None = None,
    labels: Sequence[str] | None = None,
) -> Path:
    """Train every (run, seed) of ``sweep`` that is not stored yet, storing each at once.

    Args:
        sweep: what to train.
        seeds: a subset of ``sweep.seeds`` to train now (default: all).
        device: where to train; on a CUDA device the reference run is also
            trained on the CPU, so that the reproduction test can check it.
        results_dir: where to write (default: the package's results folder).
        restart: discard stored results of another version or configuration
            (otherwise they are an error).
        progress: progress bars on standard error.
        command: the command line to record (default: this process's).
        labels: train only these variants (default: all); an unknown label is an error.

    Returns:
        The path of the results file.
    """
    device = check_device(device)
    chosen = _chosen_seeds(sweep, seeds)
    command = command or f"python -m rope_lessons.sweep {sweep.name}"
    path = results_path(sweep.name, results_dir)
    found = _read_for_writing(sweep, path.parent, restart)
    content: dict[str, Any] = (
        found[0]
        if found
        else {
            "format": FORMAT,
            "name": sweep.name,
            "version": sweep.version,
            "description": sweep.description,
            "config": sweep.config(),
            "seeds": list(sweep.seeds),
            "results": [],
            "reference": None,
        }
    )
    pending = _pending(sweep, chosen, content["results"])
    if labels is not None:
        wanted = {sweep.run(label).label for label in labels}  # refuses an unknown label
        pending = [(run, s) for run, s in pending if run.label in wanted]
    # The bar counts tokens (Run.cost), so that its estimate of the time left weighs
    # long runs as long.
    bar = tqdm(
        total=sum(run.cost for run, _ in pending),
        desc=f"{sweep.name}: {len(pending)} runs",
        disable=not progress,
        file=sys.stderr,
        unit="tok",
        unit_scale=True,
    )
    for run, seed in pending:
        bar.set_postfix_str(f"{run.label}, seed {seed}")
        result = run_once(run, seed, device, progress=False)
        content["results"].append({"result": result.to_json(), "record": record(device, command)})
        content["reference"] = content["reference"] or _stored_reference(sweep, content)
        write_results(path, content)
        bar.update(run.cost)
    bar.close()
    if content["reference"] is None:
        content["reference"] = _cpu_reference(sweep, command)
        write_results(path, content)
    return path


def merge_results(sweep: Sweep, source_dir: Path, results_dir: Path | None = None) -> Path:
    """Add to the sweep's results the (run, seed) pairs stored in ``source_dir`` but not yet
    here: e.g. seeds trained in parallel by another process (``--seeds ... --results-dir``).

    Both files are verified first (hash, version, configuration), each merged entry keeps
    its own record (command, machine, date), and a pair stored in both is kept as it is
    here. With nothing stored here yet, the source is copied.

    Returns:
        The path of the results file written.

    Raises:
        ValueError: if ``source_dir`` holds no results of the sweep, or either file fails
            its verification.
    """
    found = _read(sweep, Path(source_dir))
    if found is None:
        raise ValueError(f"{source_dir} holds no results of sweep {sweep.name!r}")
    source = found[0]
    path = results_path(sweep.name, results_dir)
    here = _read(sweep, path.parent)
    content: dict[str, Any] = here[0] if here else {**source, "results": [], "reference": None}
    done = {(e["result"]["label"], e["result"]["seed"]) for e in content["results"]}
    for entry in source["results"]:
        if (entry["result"]["label"], entry["result"]["seed"]) not in done:
            content["results"].append(entry)
    content["reference"] = (
        content["reference"] or _stored_reference(sweep, content) or source["reference"]
    )
    write_results(path, content)
    return path


def _read_for_writing(
    sweep: Sweep, results_dir: Path, restart: bool
) -> tuple[dict[str, Any], str] | None:
    """The stored results that a run of the sweep adds to, or None to start afresh."""
    try:
        return None if restart else _read(sweep, results_dir)
    except ValueError as error:
        raise ValueError(f"{error} (or pass restart=True / --restart to start over)") from None


def _chosen_seeds(sweep: Sweep, seeds: Sequence[int] | None) -> tuple[int, ...]:
    chosen = tuple(sweep.seeds if seeds is None else seeds)
    unknown = sorted(set(chosen) - set(sweep.seeds))
    if unknown:
        raise ValueError(f"seeds {unknown} are not seeds of sweep {sweep.name!r}: {sweep.seeds}")
    return chosen


def _pending(
    sweep: Sweep, seeds: Sequence[int], stored: Sequence[dict[str, Any]]
) -> list[tuple[Run[Any], int]]:
    done = {(e["result"]["label"], e["result"]["seed"]) for e in stored}
    return [(run, s) for s in seeds for run in sweep.runs if (run.label, s) not in done]


def pending_runs(
    sweep: Sweep,
    *,
    seeds: Sequence[int] | None = None,
    results_dir: Path | None = None,
    restart: bool = False,
) -> list[tuple[Run[Any], int]]:
    """The (run, seed) pairs that :func:`run_sweep` with these arguments would train, in order."""
    chosen = _chosen_seeds(sweep, seeds)
    found = _read_for_writing(sweep, results_path(sweep.name, results_dir).parent, restart)
    return _pending(sweep, chosen, found[0]["results"] if found else [])


# Steps trained to measure a machine's throughput for --dry-run, after a warm-up run.
TIMING_STEPS = 25


def measure_throughput(
    sweep: Sweep, device: torch.device | str = "cpu", steps: int = TIMING_STEPS
) -> float:
    """Cost units (:attr:`~rope_lessons.experiments.Run.cost`: tokens, a training token
    counting three, an evaluated one one) per second of the sweep's cheapest run on ``device``.

    Times its first ``steps`` training steps and one evaluation, after an untimed
    warm-up run of a few steps (caches, kernels, the first allocations), so that only
    building the model remains as overhead and the estimate errs a little slow.
    """
    run, seed = sweep.reference()
    steps = min(steps, run.steps)
    run_once(run, seed, device, progress=False, stop_after=min(3, steps), checkpoints=False)
    started = time.perf_counter()
    run_once(run, seed, device, progress=False, stop_after=steps, checkpoints=False)
    seconds = time.perf_counter() - started
    evaluated = sum(run.eval_lens) * EVAL_BATCH_SIZE * run.eval_batches
    return (3 * steps * run.batch_size * run.train_len + evaluated) / seconds


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def dry_run(
    sweep: Sweep,
    *,
    seeds: Sequence[int] | None = None,
    device: torch.device | str = "cpu",
    results_dir: Path | None = None,
    restart: bool = False,
    throughput: float | None = None,
) -> str:
    """What :func:`run_sweep` would train, and an estimate of how long it would take.

    The runs with their cost, the seeds, the pending (run, seed) count and an
    estimated time: their total :attr:`~rope_lessons.experiments.Run.cost` divided by ``throughput``
    (cost units per second), measured with :func:`measure_throughput` on
    ``device`` when not given. Nothing is written.
    """
    device = check_device(device)
    chosen = _chosen_seeds(sweep, seeds)
    pending = pending_runs(sweep, seeds=chosen, results_dir=results_dir, restart=restart)
    lines = [f"{sweep.name} (v{sweep.version}): {sweep.description}", "runs (cost in tokens):"]
    lines += [f"    {run.label}: {run.cost:,}" for run in sweep.runs]
    lines.append(f"seeds: {' '.join(map(str, chosen))}")
    total = sum(run.cost for run, _ in pending)
    lines.append(
        f"pending: {len(pending)} of {len(sweep.runs) * len(chosen)} (run, seed) pairs, "
        f"{total:,} tokens"
    )
    if pending:
        if throughput is None:
            throughput = measure_throughput(sweep, device)
            source = (
                f"measured on {device} with {torch.get_num_threads()} thread(s): "
                f"{min(TIMING_STEPS, sweep.reference()[0].steps)} steps and one evaluation "
                f"of {sweep.reference()[0].label!r}"
            )
        else:
            throughput = float(throughput)
            source = "stated"
        if not (math.isfinite(throughput) and throughput > 0):
            raise ValueError(f"throughput must be a finite number > 0, got {throughput}")
        lines.append(
            f"estimated time: about {_duration(total / throughput)} "
            f"(an estimate, from {throughput:,.0f} tokens/s, {source})"
        )
    return "\n".join(lines)


def _stored_reference(sweep: Sweep, content: dict[str, Any]) -> dict[str, Any] | None:
    """The stored entry of the reference (run, seed), if it was trained on the CPU on one thread."""
    run, seed = sweep.reference()
    for entry in content["results"]:
        same_run = (entry["result"]["label"], entry["result"]["seed"]) == (run.label, seed)
        if same_run and entry["record"]["device"] == "cpu" and entry["record"]["threads"] == 1:
            found: dict[str, Any] = entry
            return found
    return None


def _cpu_reference(sweep: Sweep, command: str) -> dict[str, Any]:
    """Train the reference (run, seed) on the CPU with one thread."""
    run, seed = sweep.reference()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run_once(run, seed, "cpu", progress=False)
        return {"result": result.to_json(), "record": record(torch.device("cpu"), command)}
    finally:
        torch.set_num_threads(threads)


def without_paths(arguments: Sequence[str]) -> list[str]:
    """The command-line arguments as recorded: a folder given to ``--results-dir`` or
    ``--merge-from`` is written ``DIR``, so that no record holds a path of the machine.

    >>> without_paths(["ch03_order", "--seeds", "1", "--results-dir", "/tmp/x"])
    ['ch03_order', '--seeds', '1', '--results-dir', 'DIR']
    """
    recorded: list[str] = []
    for argument in arguments:
        folder = recorded[-1:] in (["--results-dir"], ["--merge-from"])
        if argument.startswith(("--results-dir=", "--merge-from=")):
            argument = argument.split("=", 1)[0] + "=DIR"
        recorded.append("DIR" if folder else argument)
    return recorded


def main(argv: Sequence[str] | None = None) -> None:
    """The command line: ``python -m rope_lessons.sweep NAME`` (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m rope_lessons.sweep",
        description="Train a stored sweep and write its results (resumes where it stopped).",
    )
    parser.add_argument("name", nargs="?", help="the sweep to run (see --list)")
    parser.add_argument("--list", action="store_true", help="list the sweeps and their state")
    parser.add_argument("--seeds", type=int, nargs="+", help="train only these of its seeds")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    parser.add_argument(
        "--restart", action="store_true", help="discard stored results of another version"
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        metavar="DIR",
        help="write and read results in DIR instead of the installed package's folder",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the runs, seeds, pending (run, seed) count and an estimated time; no training",
    )
    parser.add_argument(
        "--throughput",
        type=float,
        metavar="TOKENS_PER_S",
        help="with --dry-run: estimate from this throughput instead of measuring one",
    )
    parser.add_argument("--labels", action="store_true", help="list the variant labels of NAME")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="LABEL",
        help="train only these variants (see --labels); the others stay as stored",
    )
    parser.add_argument(
        "--merge-from",
        type=Path,
        metavar="DIR",
        help="add the runs stored in DIR (e.g. seeds trained by another process) and stop",
    )
    args = parser.parse_args(argv)
    results_dir: Path | None = args.results_dir
    if args.list:
        for name in available():
            sweep = get_sweep(name)
            try:
                state = load_sweep(sweep, results_dir).describe()
            except ValueError as error:
                state = f"not usable: {error}"
            print(f"{name} (v{sweep.version}): {sweep.description}\n    {state}")
        return
    if args.name is None:
        parser.error("name a sweep, or pass --list")
    if args.throughput is not None and not args.dry_run:
        parser.error("--throughput only applies with --dry-run")
    if args.only is not None and (args.dry_run or args.labels or args.merge_from is not None):
        parser.error("--only applies to training, not with --dry-run, --labels or --merge-from")
    try:
        sweep = get_sweep(args.name)
        if args.labels:
            print("\n".join(sweep.labels))
            return
        if args.merge_from is not None:
            path = merge_results(sweep, args.merge_from, results_dir)
            print(f"wrote {path}")
            print(load_sweep(sweep, path.parent).describe())
            return
        torch.set_num_threads(choose_threads())
        if args.dry_run:
            print(
                dry_run(
                    sweep,
                    seeds=args.seeds,
                    device=args.device,
                    results_dir=results_dir,
                    restart=args.restart,
                    throughput=args.throughput,
                )
            )
            return
        given = sys.argv[1:] if argv is None else list(argv)
        command = " ".join(
            ["python -m rope_lessons.sweep", *map(shlex.quote, without_paths(given))]
        )
        path = run_sweep(
            sweep,
            seeds=args.seeds,
            device=args.device,
            results_dir=results_dir,
            restart=args.restart,
            command=command,
            labels=args.only,
        )
    except ValueError as error:
        parser.exit(2, f"error: {error}\n")
    print(f"wrote {path}")
    print(load_sweep(sweep, path.parent).describe())


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy, so that the Sweep class of
    # rope_lessons.sweeps modules and of main() is the same class.
    from rope_lessons import sweep as _sweep

    _sweep.main()
