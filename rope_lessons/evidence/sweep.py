"""A stored sweep's definition: a named, versioned experiment, every run trained with
every seed.

A sweep is a module ``rope_lessons/sweeps/<name>.py`` that defines
``SWEEP = Sweep(...)`` (:mod:`rope_lessons.sweeps` finds them). Its
:meth:`Sweep.config` describes every run as JSON values, stored beside the
results; :func:`same_config` compares two such descriptions, numbers to a
relative :data:`CONFIG_RELATIVE_TOLERANCE`, so that a frequency recomputed with
other rounding is still the same run.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from rope_lessons.evidence.runs import (
    Run,
)

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
        """The cheapest run (see :attr:`~rope_lessons.evidence.runs.Run.cost`) with the lowest
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
