"""Chapter 6: the nine RoPE placements on the same small character language model.

Every placement of :data:`~rope_lessons.attention.PLACEMENTS` trains the same
causal two-layer model (width 64, four heads of dimension 16) on the course
corpus, 300 steps of 32 windows of 64 characters; the stored number is the
validation loss at the end, with :func:`~rope_lessons.vo_rope.reading_stats`
on the trained model. ``notebooks/06_placements.ipynb`` trains seed 0 of some
placements live and sets the table beside Su's (kexue.fm/archives/10862).
"""

from __future__ import annotations

from rope_lessons.attention import PLACEMENTS
from rope_lessons.corpus import CharCorpus
from rope_lessons.experiments import Run, make_run
from rope_lessons.model import TinyTransformer
from rope_lessons.sweep import Sweep
from rope_lessons.vo_rope import reading_stats

TRAIN_LEN = 64
STEPS = 300


def placement_run(placement: str, *, steps: int = STEPS) -> Run[TinyTransformer]:
    """The chapter's language model with RoPE at ``placement``, trained for ``steps``."""
    return make_run(
        placement,
        CharCorpus(),
        train_len=TRAIN_LEN,
        eval_lens=(TRAIN_LEN,),
        steps=steps,
        analyse=reading_stats,
        dim=64,
        n_layers=2,
        n_heads=4,
        placement=placement,
    )


SWEEP = Sweep(
    name="ch06_placements",
    version=1,
    description=(
        "Chapter 6: the nine RoPE placements (nope, q, k, v, o, qk, vo, qkv, qkvo) on a "
        "2-layer width-64 causal character LM, 300 steps at length 64; validation loss."
    ),
    runs=tuple(placement_run(placement) for placement in PLACEMENTS),
    seeds=(0, 1, 2),
)
