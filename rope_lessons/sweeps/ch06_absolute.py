"""Chapter 6: absolute positions on the placement sweep's character language model.

How much of NoPE's gap do absolute positions recover, and do the placements
that turn one side only (``q``, ``v``, ``o``) behave like them? ``"learned"``
(a trained table of positions added to the embeddings) and ``"sinusoidal"``
(the Transformer's fixed table) train exactly as the nine placements of
:mod:`rope_lessons.sweeps.ch06_placements` (two layers, width 64, four heads
of dimension 16, 1600 steps of 32 windows of 64 characters), five seeds.

Run with ``python -m rope_lessons.sweeps ch06_absolute`` (about 10 minutes of
one core).
"""

from __future__ import annotations

from rope_lessons.evidence.sweep import Sweep
from rope_lessons.sweeps.ch06_placements import language_model_run

KINDS = ("learned", "sinusoidal")

SWEEP = Sweep(
    name="ch06_absolute",
    version=1,
    description=(
        "Chapter 6: learned and sinusoidal absolute positions on the placement sweep's "
        "2-layer width-64 character LM, 1600 steps at length 64, five seeds."
    ),
    runs=tuple(language_model_run(kind, position=kind) for kind in KINDS),
    seeds=(0, 1, 2, 3, 4),
)
