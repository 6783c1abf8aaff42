"""Chapter 4's trained model over seeds, trained twice as long (3000 steps).

The run of :mod:`rope_lessons.sweeps.ch04_decay`
(:func:`~rope_lessons.chapters.decay.decay_run`) with 3000 steps instead of 1500,
over seeds 0-3, so that each seed's decay numbers at 3000 steps can be read
against the same seed's at 1500 (:func:`rope_lessons.evidence.comparisons.compare_paired`
pairs them by seed): does the model still decay through its mean term when
its held-out loss has fallen further?
"""

from __future__ import annotations

from rope_lessons.chapters.decay import decay_run
from rope_lessons.evidence.sweep import Sweep

SWEEP = Sweep(
    name="ch04_decay_longer",
    version=1,
    description=(
        "Chapter 4: the ch04_decay run trained for 3000 steps instead of 1500, seeds 0-3, "
        "to see whether the split of the decay into mean term and rest holds with more training."
    ),
    runs=(decay_run(steps=3000),),
    seeds=tuple(range(4)),
)
