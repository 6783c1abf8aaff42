"""Chapter 6: where position reaches the attention scores, placement by placement.

Five placements, the one-sided ``q``, ``k``, ``v`` and ``o`` and ``qk``, trained
exactly as in :mod:`rope_lessons.sweeps.ch06_placements` (two layers, width 64,
four heads, 1600 steps of 32 windows of 64 characters), three seeds, each measured with
:func:`~rope_lessons.chapters.vo_rope.key_position_stats`: how far each layer's attention
rows move (total-variation distance) when the keys' positions are permuted and
the queries keep theirs. With ``q``, ``v`` or ``o`` alone the first layer's
logits :math:`(R_m q_m)^\\top k_n` never see a key's position, so its number is
0 as NoPE's is; with ``k`` they do. The second layer's number says how much
position reaches the scores through what the first layer wrote into each token.
NoPE is left out (no position enters it anywhere, so both numbers are 0 by
construction; ``tests/test_vo_rope.py`` checks it), and so are ``vo``, ``qkv``
and ``qkvo``, to keep the sweep to 15 runs.
``notebooks/06_placements.ipynb`` sets these numbers beside the placements' losses.
"""

from __future__ import annotations

from rope_lessons.chapters.vo_rope import key_position_stats
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.sweeps.ch06_placements import language_model_run

KEY_PLACEMENTS = ("q", "k", "v", "o", "qk")
"""The placements measured, in the order the sweep trains them."""

SWEEP = Sweep(
    name="ch06_key_positions",
    version=1,
    description=(
        "Chapter 6: the placements q, k, v, o and qk on the 2-layer width-64 causal "
        "character LM of ch06_placements (1600 steps at length 64), three seeds; how much "
        "each layer's attention moves when the keys' positions are permuted."
    ),
    runs=tuple(
        language_model_run(placement, placement=placement, analyse=key_position_stats)
        for placement in KEY_PLACEMENTS
    ),
    seeds=(0, 1, 2),
)
