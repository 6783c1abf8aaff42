"""Chapter 5: how far must the slowest kept pair turn? A dose-response sweep of its angle.

In :mod:`rope_lessons.sweeps.ch05_prope_ladders` a slowest kept pair that
turns by 5.46 rad over the trained context (``p=18/32``) costs nothing past
the trained length, and seven partly turning pairs whose slowest reaches
2.30 rad (``p=0.75``) cost a lot: the data cannot say whether the line lies
at half a turn (pi), a full turn (2 pi) or between, nor whether the count of
partly turning pairs or their angle matters. Here the angle is the dose.

Every ladder starts from ``p=17/32`` at base 100 (head dimension 64,
trained at T = 64): pairs 0-16 of RoPE's ladder, all turning fully over the
63 distances of the trained context (the slowest, pair 16, by 6.30 rad), and
pairs 17-31 stopped. To it, pair 17 is given the
frequency that turns it by a chosen angle ``phi`` over those 63 distances,
``theta = phi / (T - 1)``; nothing else changes, so every ladder keeps the
same 17 fully turning pairs and the same model, budget and evaluation as
``ch05_prope`` and ``ch05_prope_ladders``, whose results it is compared with
seed by seed (``p=17/32`` there is ``phi = 0``, ``p=18/32`` is
``phi = 5.46`` rad, 1.74 pi, on the first series).

Ladders ``one pair at phi``: pair 17 alone, turning by ``phi`` = pi/4,
pi/2, pi or 3 pi/2, the one partly turning pair
(:func:`~rope_lessons.chapters.spectrum.turn_counts`). Angles of 2 pi and more are not
trained: ``p=17/32`` itself ends on pair 16 at 6.30 rad, just past a full
turn, and ``p=18/32`` adds one at 5.46 rad.

Cost. About 64 to 90 s of one core per (run, seed) on an idle machine
(``ch05_prope``), 200 to 280 s on the shared one that trained it, 20 runs.

Run with ``python -m rope_lessons.sweeps ch05_turn_threshold``.
"""

from __future__ import annotations

import math

import torch

from rope_lessons.evidence.sweep import Sweep
from rope_lessons.rope.spec import Rope
from rope_lessons.sweeps.ch05_prope import BASE, HEAD_DIM, SEEDS, TRAIN_LEN, variant_run

FULLY_TURNING = 17  # pairs 0-16 of the base-100 ladder turn fully in 63 distances
# The angles, in units of pi, by which the added pair turns over T - 1 distances.
ONE_PAIR_ANGLES = (0.25, 0.5, 1.0, 1.5)


def turn_ladder(slowest_angle: float, pairs: int) -> Rope:
    """The ``p=17/32`` ladder at base 100 with ``pairs`` more pairs turning: the slowest of
    them by ``slowest_angle`` radians over the ``T - 1`` distances of the trained context,
    each next one ``BASE^(2/d)`` times faster (RoPE's spacing), the rest stopped.

    Returns:
        A spec with ``d/2 = 32`` frequencies, pairs ``17 .. 17 + pairs - 1`` added.
    """
    theta = Rope(HEAD_DIM, BASE, p=FULLY_TURNING / (HEAD_DIM // 2)).theta.clone()
    step = BASE ** (2.0 / HEAD_DIM)
    for j in range(pairs):
        # pair 17 + j turns step^(pairs - 1 - j) times faster than the slowest, 17 + pairs - 1
        theta[FULLY_TURNING + j] = slowest_angle / (TRAIN_LEN - 1) * step ** (pairs - 1 - j)
    return Rope.from_theta(theta.to(torch.float64))


LADDERS: dict[str, Rope] = {
    f"one pair at {angle:g} pi": turn_ladder(angle * math.pi, 1) for angle in ONE_PAIR_ANGLES
}

SWEEP = Sweep(
    name="ch05_turn_threshold",
    version=1,
    description=(
        "Chapter 5: the p=17/32 ladder at base 100 with one added pair turning by pi/4, pi/2, "
        "pi or 3 pi/2 over the trained context; the model and evaluation of ch05_prope, "
        "five seeds."
    ),
    runs=tuple(variant_run(label, rope, heads=1) for label, rope in LADDERS.items()),
    seeds=SEEDS,
)
