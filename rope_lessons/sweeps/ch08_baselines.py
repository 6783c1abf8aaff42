"""Chapter 8's baselines trained from scratch, on the benchmark of ``ch08_benchmark``.

The same model, data, probes and scores as :mod:`rope_lessons.sweeps.ch08_benchmark`,
10 seeds, each run read at 512 tokens as trained:

* ``"p-rope"``: p-RoPE with p = 0.25 (only the four fastest pairs rotate),
  trained at 64. Listed first: the cheapest run, which the reproduction test
  re-trains.
* ``"rope at 512"``: plain RoPE trained at the target length, 512, with the
  same number of tokens (2000 steps of 4 windows of 512, eight copied pairs
  per window, so as many copies per token as at 64).

The trained iRoPE, which learns to copy later, is the sweep ``ch08_irope``.
"""

from __future__ import annotations

import torch

from rope_lessons.experiments import Run
from rope_lessons.model import TinyTransformer
from rope_lessons.rope import Rope
from rope_lessons.sweep import Sweep
from rope_lessons.sweeps.ch08_benchmark import (
    BATCH_SIZE,
    EVAL_LEN,
    HEAD_DIM,
    TRAIN_LEN,
    benchmark_run,
    score,
)

P = 0.25


def analyse_as_trained(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """The benchmark's scores of the model as trained, read at 512."""
    return score(model, "as trained")


SWEEP = Sweep(
    name="ch08_baselines",
    version=1,
    description=(
        "Chapter 8's baselines from scratch on the copy-in-text benchmark, read at 512: "
        "p-RoPE (p=0.25) trained at 64, and plain RoPE trained at 512 with the same tokens."
    ),
    runs=(
        benchmark_run("p-rope", analyse_as_trained, rope=Rope(HEAD_DIM, p=P)),
        benchmark_run(
            "rope at 512",
            analyse_as_trained,
            train_len=EVAL_LEN,
            batch_size=BATCH_SIZE * TRAIN_LEN // EVAL_LEN,
        ),
    ),
    seeds=tuple(range(10)),
)
