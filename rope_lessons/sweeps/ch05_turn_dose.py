"""Chapter 5: the rest of the dose-response of the slowest kept pair's angle.

:mod:`rope_lessons.sweeps.ch05_turn_threshold` gives the ``p=17/32`` ladder at base 100
(pairs 0-16 turning fully over the 63 distances of the trained context, pairs 17-31
stopped) one more pair, pair 17, turning by pi/4, pi/2, pi or 3 pi/2 over those
distances; :mod:`rope_lessons.sweeps.ch05_turn_threshold_several` adds four pairs with
the slowest at pi/2 (three seeds). This sweep fills in the dose, with the same model,
budget, evaluation and five seeds, paired with theirs:

* ``one pair at phi`` for phi = 3 pi/4 and 5 pi/4 (between the angles trained there),
  and 2 pi and 4 pi, where pair 17 turns fully (one and two turns), so that the series
  runs from a quarter of a half turn to two full turns;
* ``four pairs from 1 pi``: four added pairs with RoPE's spacing (each ``100^(2/64)``
  times faster than the next), the slowest at pi, the fastest at 1.54 pi: several partly
  turning pairs at a second angle.

Cost. About 64 to 90 s of one core per (run, seed) on an idle machine, 25 runs.

Run with ``python -m rope_lessons.sweeps ch05_turn_dose``.
"""

from __future__ import annotations

import math

from rope_lessons.evidence.sweep import Sweep
from rope_lessons.sweeps.ch05_prope import SEEDS, variant_run
from rope_lessons.sweeps.ch05_turn_threshold import turn_ladder

# The angles, in units of pi, by which the one added pair turns over T - 1 distances.
ONE_PAIR_ANGLES = (0.75, 1.25, 2.0, 4.0)
SEVERAL_PAIRS = 4
SEVERAL_SLOWEST_ANGLE = 1.0  # in units of pi

LADDERS = {
    f"one pair at {angle:g} pi": turn_ladder(angle * math.pi, 1) for angle in ONE_PAIR_ANGLES
}
LADDERS[f"four pairs from {SEVERAL_SLOWEST_ANGLE:g} pi"] = turn_ladder(
    SEVERAL_SLOWEST_ANGLE * math.pi, SEVERAL_PAIRS
)

SWEEP = Sweep(
    name="ch05_turn_dose",
    version=1,
    description=(
        "Chapter 5: the p=17/32 ladder at base 100 with one added pair turning by 3 pi/4, "
        "5 pi/4, 2 pi or 4 pi, or four added pairs from pi, over the trained context; the "
        "model and evaluation of ch05_prope, five seeds."
    ),
    runs=tuple(variant_run(label, rope, heads=1) for label, rope in LADDERS.items()),
    seeds=SEEDS,
)
