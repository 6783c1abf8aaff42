"""Chapter 6: does depth change the order of the placements? One replicate at four layers.

Barbero et al.'s argument that a NoPE head cannot tell positions apart holds
in the first layer; from the second on, a causal model can recover positions
from its mask, and more layers give it more room to. ``nope``, ``q``, ``v``,
``o`` and ``qk`` train as in :mod:`rope_lessons.sweeps.ch06_placements` but
with four layers instead of two, one seed each: a replicate to set beside
the two-layer ranking, not a ranking of its own.

Run with ``python -m rope_lessons.sweeps ch06_depth`` (about 10 minutes of one
core).
"""

from __future__ import annotations

from rope_lessons.evidence.sweep import Sweep
from rope_lessons.sweeps.ch06_placements import language_model_run

PLACEMENTS = ("nope", "q", "v", "o", "qk")
LAYERS = 4

SWEEP = Sweep(
    name="ch06_depth",
    version=1,
    description=(
        "Chapter 6: nope, q, v, o and qk on the placement sweep's character LM with 4 layers "
        "instead of 2, 1600 steps at length 64, one seed."
    ),
    runs=tuple(language_model_run(p, n_layers=LAYERS, placement=p) for p in PLACEMENTS),
    seeds=(0,),
)
