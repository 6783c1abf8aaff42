"""Chapter 6: VO-RoPE's use case, one cached vector per token, trained.

VO-RoPE lets a decoder cache one turned vector per token and use it as key and
value (``shared_kv`` with ``placement="qkvo"``); J. Su's alternative caches the
unturned vector and turns the key at read time (``shared_kv`` with ``"qk"``).
Beside them: shared key and value without positions, multi-query attention
(one key head and one value head, RoPE on queries and keys, two cached
vectors), and VO-RoPE on part of the shared vector (the conventional partial
rotary of :func:`~rope_lessons.chapters.spectrum.partial_rotary_theta`, the ladder
recomputed over the turned dimensions, as in RoPER's default of half and in
Su's S2, which turns 64 of 256 dimensions).

Everything else is chapter 6's placement sweep (``ch06_placements``): the same
causal two-layer character model (width 64, four query heads of dimension 16),
1600 steps of 32 windows of 64 characters, five seeds, the same batches per
seed, so multi-head ``qk`` and ``nope`` come from that sweep, paired by seed.
"""

from __future__ import annotations

from rope_lessons.chapters.spectrum import partial_rotary_theta
from rope_lessons.evidence.runs import Run, make_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.rope.spec import Rope
from rope_lessons.sweeps.ch06_placements import STEPS, TRAIN_LEN
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import TinyTransformer

HEAD_DIM = 16
# label: (key-value heads, shared key and value, placement, fraction of the head turned)
VARIANTS: dict[str, tuple[int, bool, str, float]] = {
    "mqa_qk": (1, False, "qk", 1.0),
    "shared_qk": (1, True, "qk", 1.0),
    "shared_qkvo": (1, True, "qkvo", 1.0),
    "shared_nope": (1, True, "nope", 1.0),
    "shared_qkvo_half": (1, True, "qkvo", 0.5),
    "shared_qkvo_quarter": (1, True, "qkvo", 0.25),
}


def shared_kv_run(label: str) -> Run[TinyTransformer]:
    """The chapter's language model with the key-value layout of ``VARIANTS[label]``."""
    kv_heads, shared, placement, fraction = VARIANTS[label]
    rope = None
    if fraction < 1:
        rope = Rope.from_theta(partial_rotary_theta(HEAD_DIM, fraction))
    return make_run(
        label,
        CharCorpus(),
        train_len=TRAIN_LEN,
        eval_lens=(TRAIN_LEN,),
        steps=STEPS,
        dim=64,
        n_layers=2,
        n_heads=4,
        kv_heads=kv_heads,
        shared_kv=shared,
        placement=placement,
        rope=rope,
    )


SWEEP = Sweep(
    name="ch06_shared_kv",
    version=1,
    description=(
        "Chapter 6: one key-value head on the placement sweep's character LM: MQA with "
        "QK-RoPE, shared K=V with QK-RoPE (key turned at read time), with VO-RoPE (qkvo, "
        "all, half or a quarter of the head turned) and without positions; 1600 steps at "
        "length 64, five seeds."
    ),
    runs=tuple(shared_kv_run(label) for label in VARIANTS),
    seeds=(0, 1, 2, 3, 4),
)
