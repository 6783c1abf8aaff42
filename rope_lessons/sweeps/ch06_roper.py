"""Chapter 6: RoPER's claim on two small tasks, QK against VO and QKVO (and NoPE).

RoPER (labml) rotates values and outputs on top of QK-RoPE and reports gains
on position-heavy algorithmic tasks. Two tasks of :mod:`rope_lessons.synthetic`:
:class:`~rope_lessons.synthetic.MarkerDistance` (the answer is the distance to
a retrieved token) and :class:`~rope_lessons.synthetic.CopyAtLag` (position
must steer attention; the retrieved token's content is the answer). A causal
two-layer model of width 64, 150 steps at length 32, evaluated at 32 and 64.
"""

from __future__ import annotations

from rope_lessons.experiments import Run, make_run
from rope_lessons.model import TinyTransformer
from rope_lessons.sweep import Sweep
from rope_lessons.synthetic import CopyAtLag, MarkerDistance, Task

ROPER_PLACEMENTS = ("nope", "qk", "vo", "qkvo")
TASKS: dict[str, Task] = {
    "distance": MarkerDistance(max_distance=30),
    "copy": CopyAtLag(lag=8),
}


def roper_run(task: str, placement: str) -> Run[TinyTransformer]:
    """``task`` (a key of :data:`TASKS`) with RoPE at ``placement``; label ``task/placement``."""
    return make_run(
        f"{task}/{placement}",
        TASKS[task],
        train_len=32,
        eval_lens=(32, 64),
        steps=150,
        dim=64,
        n_layers=2,
        n_heads=4,
        placement=placement,
    )


SWEEP = Sweep(
    name="ch06_roper",
    version=1,
    description=(
        "Chapter 6: nope, qk, vo, qkvo on MarkerDistance(max_distance=30) and "
        "CopyAtLag(lag=8), 2-layer width-64 causal model, 150 steps at length 32, "
        "evaluated at 32 and 64."
    ),
    runs=tuple(roper_run(task, placement) for task in TASKS for placement in ROPER_PLACEMENTS),
    seeds=(0, 1, 2, 3, 4),
)
