"""Chapter 6: the nine placements again at twice the training budget (fewer seeds).

The runs of :mod:`rope_lessons.sweeps.ch06_placements` with 600 steps instead
of 300, two seeds: is the ranking of the placements an artefact of one budget?
"""

from __future__ import annotations

from rope_lessons.attention import PLACEMENTS
from rope_lessons.sweep import Sweep
from rope_lessons.sweeps.ch06_placements import STEPS, placement_run

SWEEP = Sweep(
    name="ch06_placements_long",
    version=1,
    description=(
        "Chapter 6: the nine RoPE placements on the chapter's character LM at twice the "
        "budget (600 steps at length 64), two seeds; validation loss."
    ),
    runs=tuple(placement_run(placement, steps=2 * STEPS) for placement in PLACEMENTS),
    seeds=(0, 1),
)
