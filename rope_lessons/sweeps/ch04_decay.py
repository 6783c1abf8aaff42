"""Chapter 4's trained model over seeds: does a small RoPE language model learn decay, and how?

One run, :func:`~rope_lessons.decay.decay_run` (a causal two-layer RoPE
model of width 64 with four heads, 300 steps on the course's corpus at
context 128), trained with eight seeds. Its ``analyse`` hook,
:func:`~rope_lessons.decay.decay_numbers`, stores per layer and head the
near-minus-far drop of the mean attention logit, of the unrotated score and of
the mean vectors' rotary logit, and the log ratio of near to far attention
weight. ``notebooks/04_decay.ipynb`` trains seed 0 live.
"""

from __future__ import annotations

from rope_lessons.decay import decay_run
from rope_lessons.sweep import Sweep

SWEEP = Sweep(
    name="ch04_decay",
    version=1,
    description=(
        "Chapter 4: per-head decay of attention with distance in a two-layer RoPE model "
        "trained on the corpus (decay_run), with the rotation's and the weights' shares."
    ),
    runs=(decay_run(),),
    seeds=tuple(range(8)),
)
