"""Chapter 5: p-RoPE against conventional partial rotary, at and beyond the trained length.

One model and budget for every variant: a character model on the corpus,
width 64, 2 layers, ONE head of dimension 64 (32 rotary pairs), trained for
300 steps at length 64 and evaluated at 64, 128 and 256 (1x, 2x, 4x).

The base is 100, not 10000, so that the question is posed at all. With base
10000 the slowest pair turns by 63 * 10000^(-62/64) = 0.008 rad over the 63
distances of a 64-token context, and the slowest quarter by at most 0.06 rad:
unrotated in all but name, so every p would look alike by construction. With
base 100 the slowest pair turns by 0.73 rad over 64 tokens (about what it
turns over Gemma-2B's 8192 tokens in Barbero et al.'s experiment: 0.88 rad at
base 10000, head dimension 256) and by 2.9 rad over 256.

Variants: p-RoPE with p in {0, 0.25, 0.5, 0.75, 1} (keep the fastest pairs,
stop the rest; p = 0 is NoPE, p = 1 is RoPE) and GPT-NeoX partial rotary with
``rotary_pct`` 0.25 and 0.75 (a ladder recomputed over the rotated
dimensions, which keeps the slowest frequency).

Run with ``python -m rope_lessons.sweep ch05_prope``.
"""

from __future__ import annotations

from rope_lessons.corpus import CharCorpus
from rope_lessons.experiments import Run, make_run
from rope_lessons.model import TinyTransformer
from rope_lessons.rope import Rope
from rope_lessons.spectrum import partial_rotary_theta
from rope_lessons.sweep import Sweep

HEAD_DIM = 64
BASE = 100.0
TRAIN_LEN = 64
EVAL_LENS = (64, 128, 256)
P_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0)
PARTIAL_FRACTIONS = (0.25, 0.75)


def _run(label: str, rope: Rope) -> Run[TinyTransformer]:
    return make_run(
        label,
        CharCorpus(),
        train_len=TRAIN_LEN,
        eval_lens=EVAL_LENS,
        steps=300,
        eval_batches=2,
        dim=HEAD_DIM,
        n_layers=2,
        n_heads=1,
        rope=rope,
    )


PROPE = tuple(_run(f"p={p:g}", Rope(HEAD_DIM, BASE, p=p)) for p in P_VALUES)
PARTIAL = tuple(
    _run(
        f"partial {f:g}",
        Rope.from_theta(partial_rotary_theta(HEAD_DIM, f, BASE)),
    )
    for f in PARTIAL_FRACTIONS
)

SWEEP = Sweep(
    name="ch05_prope",
    version=1,
    description=(
        "Chapter 5: p-RoPE (p = 0, 0.25, 0.5, 0.75, 1) and GPT-NeoX partial rotary "
        "(0.25, 0.75) on the corpus, head dimension 64, base 100, trained at 64, "
        "evaluated at 64, 128, 256."
    ),
    runs=PROPE + PARTIAL,
    seeds=(0, 1, 2),
)
