"""Chapter 5: four partly turning pairs against one at the same angle: does the count add?

:mod:`rope_lessons.sweeps.ch05_turn_threshold` adds one pair to the ``p=17/32``
ladder at base 100 (the 17 pairs that turn fully within the trained 64
tokens) and varies its angle over the trained context. Here four pairs are
added instead (pairs 17-20), with the spacing of RoPE's ladder at base 100
(each ``100^(2/64)`` = 1.155 times faster than the next) and the slowest at
pi/2, the angle of ``one pair at 0.5 pi`` there, so that the fastest turns by
0.77 pi: four partly turning pairs, against one at the same slowest angle.
Same model, budget and evaluation as ``ch05_prope``; three seeds, the first
three of the other sweeps, paired with theirs.

Cost. About 64 to 90 s of one core per (run, seed) on an idle machine (80 to
130 s on the shared machine that trained it), 3 runs.

Run with ``python -m rope_lessons.sweeps ch05_turn_threshold_several``.
"""

from __future__ import annotations

import math

from rope_lessons.evidence.sweep import Sweep
from rope_lessons.sweeps.ch05_prope import variant_run
from rope_lessons.sweeps.ch05_turn_threshold import turn_ladder

PAIRS = 4
SLOWEST_ANGLE = 0.5  # in units of pi, over the T - 1 distances of the trained context
LABEL = f"four pairs from {SLOWEST_ANGLE:g} pi"

SWEEP = Sweep(
    name="ch05_turn_threshold_several",
    version=1,
    description=(
        "Chapter 5: the p=17/32 ladder at base 100 with four added pairs, the slowest turning "
        "by pi/2 over the trained context; the model and evaluation of ch05_prope, three seeds."
    ),
    runs=(variant_run(LABEL, turn_ladder(SLOWEST_ANGLE * math.pi, PAIRS), heads=1),),
    seeds=(0, 1, 2),
)
