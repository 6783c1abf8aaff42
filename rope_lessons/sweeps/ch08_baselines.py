"""Chapter 8's baselines trained from scratch, on the benchmark of ``ch08_benchmark``.

The same model, data, probes and scores as :mod:`rope_lessons.sweeps.ch08_benchmark`,
10 seeds, each run read at 512 tokens as trained:

* ``"p-rope"``: p-RoPE with p = 0.25 (only the four fastest pairs rotate),
  trained at 64. Listed first: the cheapest run, which the reproduction test
  re-trains.
* ``"rope at 512"``: plain RoPE trained at the target length, 512, with as
  many windows per step as the others (32) and twice their steps (4000), as
  the iRoPE: eight copied pairs per window, so as many copies per token as at
  64, and sixteen times the tokens of the runs at 64. (With the same tokens,
  2000 steps of 4 windows, it was still on its plateau.)

The trained iRoPE, which learns to copy later, is the sweep ``ch08_irope``.

Cost. ``"rope at 512"`` reads sixteen times the tokens of the runs at 64:
the stored seeds were trained on one GPU (``--device cuda``, about six
minutes for all twenty runs with one process per seed), with the reference
run on the CPU; ``--dry-run`` estimates about 21 hours on one CPU thread.
"""

from __future__ import annotations

import torch

from rope_lessons.evidence.runs import Run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.rope.spec import Rope
from rope_lessons.sweeps.ch08_benchmark import (
    BATCH_SIZE,
    EVAL_LEN,
    HEAD_DIM,
    STEPS,
    benchmark_run,
    run_seed,
    score,
)
from rope_lessons.toy.model import TinyTransformer

P = 0.25


def analyse_as_trained(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """The benchmark's scores of the model as trained, read at 512."""
    return score(model, "as trained", run_seed())


SWEEP = Sweep(
    name="ch08_baselines",
    version=2,
    description=(
        "Chapter 8's baselines from scratch on the copy-in-text benchmark, read at 512: "
        "p-RoPE (p=0.25) trained at 64, and plain RoPE trained at 512 for 4000 steps of 32 "
        "windows; text loss and copied-letter accuracy, share below log 26 and loss."
    ),
    runs=(
        benchmark_run("p-rope", analyse_as_trained, rope=Rope(HEAD_DIM, p=P)),
        benchmark_run(
            "rope at 512",
            analyse_as_trained,
            train_len=EVAL_LEN,
            batch_size=BATCH_SIZE,
            steps=2 * STEPS,
        ),
    ),
    seeds=tuple(range(10)),
)
