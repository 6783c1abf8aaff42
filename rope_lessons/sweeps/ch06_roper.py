"""Chapter 6: RoPER's claim on two small tasks, QK against VO and QKVO (and NoPE).

RoPER (labml) rotates values and outputs on top of QK-RoPE and reports gains
on position-heavy algorithmic tasks. Two tasks of :mod:`rope_lessons.toy.synthetic`:
:class:`~rope_lessons.toy.synthetic.MarkerDistance` (the answer is the distance to
a retrieved token) and :class:`~rope_lessons.toy.synthetic.CopyAtLag` (position
must steer attention; the retrieved token's content is the answer). A causal
two-layer model of width 64, trained at length 32 and evaluated at 32 and 64.

Steps per task (:data:`STEPS`), chosen from learning curves of seed 0 so that
every placement has stopped improving: version 1 trained 150 steps, where
``nope`` on both tasks and ``vo`` on copying were still climbing. Trained
longer by hand, seed 0 of ``distance/nope`` reached 79% accuracy at length 32
after 960 of 1200 steps and 97% at 1200; with 2400 steps, 99% at 1920 and
98.5% at 2400. Seed 0 of ``copy/vo`` was at 99.6% after 480 of 1200 steps and
100% from 720 on. Only ``copy/nope``, the floor without positions, keeps
creeping: seed 0 went from 22.0% to 22.7% over the last fifth of 1200 steps,
and from 23.5% to 24.2% over the last fifth of 2400.
"""

from __future__ import annotations

from rope_lessons.evidence.runs import Run, make_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.toy.model import TinyTransformer
from rope_lessons.toy.synthetic import CopyAtLag, MarkerDistance, Task

ROPER_PLACEMENTS = ("nope", "qk", "vo", "qkvo")
TASKS: dict[str, Task] = {
    "distance": MarkerDistance(max_distance=30),
    "copy": CopyAtLag(lag=8),
}
STEPS: dict[str, int] = {"distance": 2400, "copy": 1200}
"""Training steps per task: what seed 0's learning curves needed (see the module's text)."""


def roper_run(task: str, placement: str) -> Run[TinyTransformer]:
    """``task`` (a key of :data:`TASKS`) with RoPE at ``placement``; label ``task/placement``."""
    return make_run(
        f"{task}/{placement}",
        TASKS[task],
        train_len=32,
        eval_lens=(32, 64),
        steps=STEPS[task],
        dim=64,
        n_layers=2,
        n_heads=4,
        placement=placement,
    )


SWEEP = Sweep(
    name="ch06_roper",
    version=2,
    description=(
        "Chapter 6: nope, qk, vo, qkvo on MarkerDistance(max_distance=30) and "
        "CopyAtLag(lag=8), 2-layer width-64 causal model, trained at length 32 for "
        "2400 steps (distance) or 1200 (copy), evaluated at 32 and 64."
    ),
    runs=tuple(roper_run(task, placement) for task in TASKS for placement in ROPER_PLACEMENTS),
    seeds=(0, 1, 2, 3, 4),
)
