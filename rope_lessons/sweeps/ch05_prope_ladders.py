"""Chapter 5: p-RoPE ladders that isolate one partly turning pair, and Round and Round's p.

The sweep :mod:`rope_lessons.sweeps.ch05_prope` contrasts ladders that differ
in every kept frequency (p = 0.5 at base 100 against base 10000). Here the
ladders are RoPE's at base 100 (head dimension 64, 32 pairs, trained at 64,
where pairs 0-16 turn fully and 17-31 only partly), cut after a number of
pairs, with the model, budget and evaluation of ``ch05_prope``, five seeds:

==================  ====  =======  =========
label               kept  turn     turn only
                          fully    partly
==================  ====  =======  =========
``p=17/32``           17       17          0
``p=18/32``           18       17          1
``p=0.75``            24       17          7
==================  ====  =======  =========

``p=17/32`` and ``p=18/32`` differ by exactly one pair, the first that turns
only partly (pair 17, 87% of a turn in 63 positions). ``p=0.75`` has the
fraction of Barbero et al.'s best Gemma-2B run but not its ladder: with head
dimension 256, base 10000 and 8192 tokens, 100 pairs turn fully and p = 0.75
keeps 96 of them, all turning fully, where here it keeps 7 partly turning
pairs. All run at base 100. :mod:`rope_lessons.sweeps.ch05_turn_threshold`
varies the angle of the pair after the 17.

Run with ``python -m rope_lessons.sweeps ch05_prope_ladders`` (about 17
minutes of one core).
"""

from __future__ import annotations

from rope_lessons.evidence.sweep import Sweep
from rope_lessons.rope.spec import Rope
from rope_lessons.sweeps.ch05_prope import BASE, HEAD_DIM, SEEDS, variant_run

LADDERS: dict[str, Rope] = {
    "p=17/32": Rope(HEAD_DIM, BASE, p=17 / 32),
    "p=18/32": Rope(HEAD_DIM, BASE, p=18 / 32),
    "p=0.75": Rope(HEAD_DIM, BASE, p=0.75),
}

SWEEP = Sweep(
    name="ch05_prope_ladders",
    version=1,
    description=(
        "Chapter 5: p-RoPE at base 100 keeping 17 pairs (all turn fully), 18 (one turns "
        "partly) and 24 (p = 0.75, seven turn partly), the model and evaluation of "
        "ch05_prope, five seeds."
    ),
    runs=tuple(variant_run(label, rope, heads=1) for label, rope in LADDERS.items()),
    seeds=SEEDS,
)
