"""Chapter 6: the nine RoPE placements on the same small character language model.

Every placement of :data:`~rope_lessons.toy.rotary_attention.PLACEMENTS` trains the same
causal two-layer model (width 64, four heads of dimension 16) on the course
corpus, 1600 steps of 32 windows of 64 characters, five seeds; the stored
numbers are the validation loss at every checkpoint (steps 25, 320, 640, 960,
1280 and 1600) and :func:`~rope_lessons.chapters.vo_rope.reading_stats` on the trained
model.

The budget. Version 1 stopped at 300 steps, where NoPE and the q, k, v and o
placements sat together near a smoothed character-bigram model with almost
uniform attention, and at 600 steps they had pulled apart: the ranking was a
plateau, not a finding. 1600 steps is where the learning curve of this model
size flattened in chapter 5's p-RoPE pilot (gains per 400 extra steps falling
from 0.06 to 0.025); the stored checkpoints show whether each placement has
settled by the course's rule, and step 320 shows the old plateau.
``notebooks/06_placements.ipynb`` trains seed 0 of some placements live and
sets the table beside Su's (kexue.fm/archives/10862).
"""

from __future__ import annotations

from typing import Any

from rope_lessons.chapters.vo_rope import reading_stats
from rope_lessons.evidence.runs import Analyse, Run, make_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import TinyTransformer
from rope_lessons.toy.rotary_attention import PLACEMENTS

TRAIN_LEN = 64
STEPS = 1600


def language_model_run(
    label: str,
    *,
    steps: int = STEPS,
    n_layers: int = 2,
    analyse: Analyse[TinyTransformer] = reading_stats,
    **fields: Any,
) -> Run[TinyTransformer]:
    """The chapter's language model (width 64, four heads, ``n_layers`` layers) with the
    model fields ``fields`` (e.g. ``placement="vo"`` or ``position="learned"``), trained for
    ``steps`` on the corpus at 64 characters; ``analyse`` measures the trained model."""
    return make_run(
        label,
        CharCorpus(),
        train_len=TRAIN_LEN,
        eval_lens=(TRAIN_LEN,),
        steps=steps,
        analyse=analyse,
        dim=64,
        n_layers=n_layers,
        n_heads=4,
        **fields,
    )


def placement_run(placement: str, *, steps: int = STEPS) -> Run[TinyTransformer]:
    """The chapter's language model with RoPE at ``placement``, trained for ``steps``."""
    return language_model_run(placement, steps=steps, placement=placement)


SWEEP = Sweep(
    name="ch06_placements",
    version=2,
    description=(
        "Chapter 6: the nine RoPE placements (nope, q, k, v, o, qk, vo, qkv, qkvo) on a "
        "2-layer width-64 causal character LM, 1600 steps at length 64, five seeds; "
        "validation loss at every checkpoint."
    ),
    runs=tuple(placement_run(placement) for placement in PLACEMENTS),
    seeds=(0, 1, 2, 3, 4),
)
