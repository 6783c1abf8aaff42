"""Chapter 4's trained model over seeds: does a small RoPE language model learn decay, and how?

One run, :func:`~rope_lessons.chapters.decay.decay_run` (a causal two-layer RoPE
model of width 64 with four heads, 1500 steps on the course's corpus at
context 128), trained with eight seeds. Its ``analyse`` hook,
:func:`~rope_lessons.chapters.decay.decay_numbers`, stores per layer and head the
near-minus-far drop of the mean attention logit, of the unrotated score, of
its mean term (the mean vectors' rotary logit) and the rest (``logit`` less
the mean term), and
the log ratio of near to far attention weight. ``notebooks/04_decay.ipynb``
trains seed 0 live.

Version 2: 1500 steps instead of 300 (at 300 the held-out loss still fell by
0.029 over the last fifth of training, against a seed spread of 0.016), and
the covariance term. 1500 steps is what a recording of about 25 minutes of one
core allows (eight seeds took 17 minutes). It is not converged by the course's
rule: over the last fifth the mean held-out loss falls by 0.023 against a seed
spread of 0.009 (``load_sweep("ch04_decay").convergence("rope, corpus", 128)``);
:mod:`rope_lessons.sweeps.ch04_decay_longer` trains four of the seeds for 3000
steps to see whether the split moves.

Version 3: the same runs; the fourth number is named ``rest`` (the logit less
its mean term: the covariance term plus cross terms), not ``covariance``.
"""

from __future__ import annotations

from rope_lessons.chapters.decay import decay_run
from rope_lessons.evidence.sweep import Sweep

SWEEP = Sweep(
    name="ch04_decay",
    version=3,
    description=(
        "Chapter 4: per-head decay of attention with distance in a two-layer RoPE model "
        "trained on the corpus (decay_run), with the rotation's and the weights' shares."
    ),
    runs=(decay_run(),),
    seeds=tuple(range(8)),
)
