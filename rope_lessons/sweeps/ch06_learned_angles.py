"""Chapter 6: VO-RoPE with trained angles, on copying the token 8 steps back.

J. Su noted that his VO-RoPE runs kept QK-RoPE's fixed angles and that
trainable ones might do better (kexue.fm/archives/10862); chapter 7's LRU
trains its angles. The same causal two-layer model as the RoPER sweep
(``ch06_roper``: width 64, four heads of dimension 16), on
:class:`~rope_lessons.toy.synthetic.CopyAtLag` (lag 8), with RoPE at ``vo`` or
``qk``, its frequencies fixed at RoFormer's ladder or trained from it
(``learned_angles``). Trained at length 32 for 1200 steps (in a pilot, seed 0
of fixed ``vo`` went from 71% accuracy at 150 steps to 99.6% at 600 and 100%
at 1200), evaluated at 32 and 64; five seeds. Each run stores its layers'
frequencies at the end (:func:`~rope_lessons.chapters.vo_rope.trained_angles`).
"""

from __future__ import annotations

from rope_lessons.chapters.vo_rope import trained_angles
from rope_lessons.evidence.runs import Run, make_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.toy.model import TinyTransformer
from rope_lessons.toy.synthetic import CopyAtLag

TASK = CopyAtLag(lag=8)
STEPS = 1200
# label: (placement, angles trained)
VARIANTS: dict[str, tuple[str, bool]] = {
    "vo": ("vo", False),
    "vo_learned": ("vo", True),
    "qk": ("qk", False),
    "qk_learned": ("qk", True),
}


def learned_angles_run(label: str) -> Run[TinyTransformer]:
    """Copying at lag 8 with RoPE at ``VARIANTS[label]``."""
    placement, learned = VARIANTS[label]
    return make_run(
        label,
        TASK,
        train_len=32,
        eval_lens=(32, 64),
        steps=STEPS,
        analyse=trained_angles,
        dim=64,
        n_layers=2,
        n_heads=4,
        placement=placement,
        learned_angles=learned,
    )


SWEEP = Sweep(
    name="ch06_learned_angles",
    version=2,
    description=(
        "Chapter 6: vo and qk with fixed or trained RoPE angles on CopyAtLag(lag=8), "
        "2-layer width-64 causal model, 1200 steps at length 32, evaluated at 32 and 64; "
        "the frequencies at the end."
    ),
    runs=tuple(learned_angles_run(label) for label in VARIANTS),
    seeds=(0, 1, 2, 3, 4),
)
