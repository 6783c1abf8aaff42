"""Chapter 8: an iRoPE in the manner of Llama 4, trained from scratch on the benchmark.

The model, data, probes and scores of :mod:`rope_lessons.sweeps.ch08_benchmark`:
layers 0-2 rotate, attend within chunks of 32 tokens and RMS-normalise their
queries and keys (QK-norm); layer 3 has no position encoding, attends to every
earlier token and scales its queries by Llama 4's temperature (floor scale
32). Trained at 64 and read at 512 as trained, 10 seeds.

It learns to copy later than plain RoPE (see the chapter's learning curves),
so it trains for 4000 steps of 32 windows of 64: twice the budget of the runs
at 64, which the chapter says beside its numbers.
"""

from __future__ import annotations

from rope_lessons.evidence.sweep import Sweep
from rope_lessons.sweeps.ch08_baselines import analyse_as_trained
from rope_lessons.sweeps.ch08_benchmark import STEPS, TRAIN_LEN, benchmark_run
from rope_lessons.toy.rotary_attention import Local

CHUNK = TRAIN_LEN // 2
IROPE_STEPS = 2 * STEPS

SWEEP = Sweep(
    name="ch08_irope",
    version=2,
    description=(
        "Chapter 8: a Llama-4-style iRoPE (layers 0-2 RoPE in chunks of 32 with QK-norm, "
        "layer 3 global NoPE with temperature tuning, floor scale 32) trained from scratch at "
        "64 for 4000 steps on the copy-in-text benchmark, read at 512: text loss and copied-letter "
        "accuracy, share below log 26 and loss."
    ),
    runs=(
        benchmark_run(
            "irope",
            analyse_as_trained,
            steps=IROPE_STEPS,
            nope_layers=(3,),
            rope_local=Local(CHUNK, "chunk"),
            qk_norm=True,
            nope_temperature=CHUNK,
        ),
    ),
    seeds=tuple(range(10)),
)
