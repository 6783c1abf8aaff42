"""Chapter 3's toy experiment: RoPE, the sinusoidal encoding and no encoding on WhichFirst.

The runs are :func:`~rope_lessons.evidence.runs.order_run` for each kind (a
bidirectional two-layer model, 300 steps at length 16, evaluated at 16, 32 and
64), ten seeds each; ``notebooks/03_toy_experiment.ipynb`` trains seed 0 live.
"""

from __future__ import annotations

from rope_lessons.evidence.runs import order_run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.toy.model import PositionKind

KINDS: tuple[PositionKind, ...] = ("rope", "sinusoidal", "none")

SWEEP = Sweep(
    name="ch03_order",
    version=1,
    description=(
        "Chapter 3 toy experiment: RoPE vs sinusoidal vs no position encoding on the "
        "WhichFirst order task (order_run), trained at length 16, evaluated at 16, 32, 64."
    ),
    runs=tuple(order_run(kind) for kind in KINDS),
    seeds=tuple(range(10)),
)
