"""Chapter 3's exercise: RoPE on WhichFirst trained three times longer (900 steps).

The same run as the ``rope`` run of :mod:`rope_lessons.sweeps.ch03_order` but
for 900 steps instead of 300, over the same ten seeds, so that the two can be
compared seed by seed (:func:`rope_lessons.evidence.comparisons.compare_paired`).
"""

from __future__ import annotations

from rope_lessons.evidence.runs import order_run
from rope_lessons.evidence.sweep import Sweep

SWEEP = Sweep(
    name="ch03_order_longer",
    version=1,
    description=(
        "Chapter 3 exercise: the ch03_order RoPE run trained for 900 steps instead of 300, "
        "same seeds, to see whether longer training closes the gap at lengths 32 and 64."
    ),
    runs=(order_run("rope", steps=900, label="rope, 900 steps"),),
    seeds=tuple(range(10)),
)
