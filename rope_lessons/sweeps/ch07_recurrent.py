"""Chapter 7: real decay, complex decay (LRU) and retention, trained until the curves flatten.

Three one-layer recurrent models of width 32
(:class:`~rope_lessons.chapters.recurrent_models.RecurrentConfig`,
state 16, MLP ratio 2) that differ only in the sequence mixer: ``real`` (32 real
decays), ``complex`` (16 complex decays, the LRU layer) and ``retnet`` (retention:
fixed real decays per head, RoPE on queries and keys). Two tasks of
:mod:`rope_lessons.toy.synthetic`, trained at length 32 and evaluated at 32 and at
128 (four times the trained length):

* ``copy``: :class:`~rope_lessons.toy.synthetic.CopyAtLag` (lag 8, 16 tokens,
  chance 1/16): a delay line;
* ``mod3``: :class:`~rope_lessons.toy.synthetic.PositionModulo` (modulus 3, 8
  tokens, chance 1/3): the tokens are noise and the answer is ``t mod 3``; a
  positive real decay cannot oscillate with period 3, a complex one can.

Retention's angles are RoPE's, ``D/2`` of them per head; with 4 heads of
dimension 8 it has only 4 distinct angles. ``copy/retnet D=16`` and
``copy/retnet D=32`` (2 heads, 1 head) keep the width and change only that.

Budget. From pilot learning curves of seed 0 in runs of 2000 and 8000 steps
(batch 16, peak learning rate 1e-2, evaluated every 100 steps): the complex
model reached held-out accuracy 0.99 on copying by step 400 (2000-step run) and
on mod 3 by step 200 to 1000; retention (head dimension 32) on copying moved by
about 0.01 per 1000 steps after step 1000; the real model on copying kept
climbing slowly all the way to the end of the 8000-step run (0.27 at 2000, 0.46
at 5000, 0.60 at 8000): no affordable budget brings it to a plateau, so the
stored convergence report says so. (The recorded sweep: the complex model
solves copying between steps 400 and 2600 on its five seeds.) 4000 steps for every run,
evaluated every 100 steps (40 checkpoints: the step at which a run first
reaches an accuracy, :func:`~rope_lessons.evidence.runs.steps_to_reach`, is known
to 100 steps) on 2 batches of 256 held-out sequences per length.

The ``analyse`` hook :func:`trained_decays` stores the trained decays of the
``real`` and ``complex`` mixers (modulus and phase of each).

Run with ``python -m rope_lessons.sweeps ch07_recurrent``.
"""

from __future__ import annotations

import torch

from rope_lessons.chapters.recurrent_models import (
    ComplexDecayMixer,
    MixerKind,
    RealDecayMixer,
    RecurrentConfig,
    RecurrentModel,
)
from rope_lessons.evidence.runs import Run
from rope_lessons.evidence.sweep import Sweep
from rope_lessons.toy.synthetic import CopyAtLag, PositionModulo, Task

STEPS = 4000
N_CHECKPOINTS = 40
TASKS: dict[str, Task] = {
    "copy": CopyAtLag(lag=8, vocab=16),
    "mod3": PositionModulo(modulus=3, vocab=8),
}
# The accuracy at the trained length at which a task counts as solved.
SOLVED = 0.99


def trained_decays(
    model: RecurrentModel, run: Run[RecurrentModel], device: torch.device
) -> dict[str, float]:
    """The trained decays of the first block's mixer: ``modulus/j`` and ``phase/j`` (radians,
    in ``(-pi, pi]``) for each decay ``j`` of a ``real`` or ``complex`` mixer; nothing for
    retention, whose decays are fixed."""
    mixer = model.blocks[0].mixer
    if not isinstance(mixer, (RealDecayMixer, ComplexDecayMixer)):
        return {}
    decays = mixer.decay().detach().cpu().to(torch.complex128)
    values: dict[str, float] = {}
    for j, decay in enumerate(decays.tolist()):
        values[f"modulus/{j}"] = abs(decay)
        values[f"phase/{j}"] = float(torch.tensor(decay).angle())
    return values


def recurrent_run(task: str, mixer: MixerKind, n_heads: int = 4) -> Run[RecurrentModel]:
    """``task`` (a key of :data:`TASKS`) with ``mixer``; label ``task/mixer`` (retention:
    ``task/retnet D=<head dimension>``)."""
    data = TASKS[task]
    config = RecurrentConfig(
        vocab_size=data.vocab_size,
        mixer=mixer,
        dim=32,
        state=16,
        n_heads=n_heads,
        mlp_ratio=2,
    )
    label = f"{task}/{mixer}" + (f" D={32 // n_heads}" if mixer == "retnet" else "")
    return Run(
        label,
        config,
        data,
        train_len=32,
        eval_lens=(32, 128),
        steps=STEPS,
        batch_size=16,
        lr=1e-2,
        eval_batches=2,
        analyse=trained_decays,
        n_checkpoints=N_CHECKPOINTS,
    )


RUNS = (
    recurrent_run("copy", "real"),
    recurrent_run("copy", "complex"),
    recurrent_run("copy", "retnet", n_heads=4),
    recurrent_run("copy", "retnet", n_heads=2),
    recurrent_run("copy", "retnet", n_heads=1),
    recurrent_run("mod3", "real"),
    recurrent_run("mod3", "complex"),
    recurrent_run("mod3", "retnet", n_heads=4),
)

SWEEP = Sweep(
    name="ch07_recurrent",
    version=1,
    description=(
        "Chapter 7: real decay, complex decay (LRU) and retention (head dimension 8, 16, 32), "
        "one layer of width 32, on CopyAtLag(lag=8) and PositionModulo(3), 4000 steps at "
        "length 32, evaluated every 100 steps at 32 and 128."
    ),
    runs=RUNS,
    seeds=(0, 1, 2, 3, 4),
)
