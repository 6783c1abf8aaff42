"""Chapter 5: which RoPE frequencies a trained model uses, and what removing them costs.

Two RoPE models (width 64, 2 layers, 2 heads of dimension 32, base 10000,
16 rotary pairs per head): one on the lag-1 copy task (``CopyAtLag``, which
needs a previous-token head), one on the character corpus. After training,
:func:`frequency_analysis` measures, on held-out data at the trained length,

* the loss with the fastest quarter of the pairs (pairs 0-3) removed from
  every query and key, and with the slowest quarter (pairs 12-15) removed
  (:func:`~rope_lessons.spectrum.ablate_pairs`);
* each head's previous-token score and the share of its query norm (squared)
  that sits in the fastest quarter.

Run with ``python -m rope_lessons.sweep ch05_frequencies``; chapter 5's first
notebook trains seed 0 live and reads the other seeds from the stored results.
"""

from __future__ import annotations

from typing import Any

import torch

from rope_lessons.corpus import CharCorpus
from rope_lessons.experiments import Run, held_out, make_run
from rope_lessons.model import TinyTransformer
from rope_lessons.rope import Rope
from rope_lessons.spectrum import ablate_pairs, mean_pair_norms, offset_attention
from rope_lessons.sweep import Sweep
from rope_lessons.synthetic import CopyAtLag
from rope_lessons.training import evaluate

ABLATED_FRACTION = 4  # ablate one quarter of the pairs: the fastest or the slowest


def quarters(head_dim: int) -> tuple[list[int], list[int]]:
    """The fastest and the slowest quarter of the ``head_dim / 2`` pairs."""
    pairs = head_dim // 2
    size = pairs // ABLATED_FRACTION
    return list(range(size)), list(range(pairs - size, pairs))


@torch.no_grad()
def frequency_analysis(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """Ablation losses and per-head positional scores of a trained model (the sweep's ``analyse``).

    Returns:
        ``loss``, ``loss_without_fast``, ``loss_without_slow`` (held-out loss
        at the trained length: intact, fastest quarter removed, slowest quarter
        removed); per layer ``l`` and head ``h``: ``previous_token_L{l}H{h}``
        (mean attention to the previous token) and ``fast_share_L{l}H{h}`` (the
        share of the mean squared query pair norms in the fastest quarter).
    """
    fast, slow = quarters(model.config.head_dim)

    def loss(candidate: TinyTransformer) -> float:
        sampler = held_out(run.data, run.train_len, device=device)
        return evaluate(candidate, sampler, batches=run.eval_batches).loss

    numbers = {
        "loss": loss(model),
        "loss_without_fast": loss(ablate_pairs(model, fast)),
        "loss_without_slow": loss(ablate_pairs(model, slow)),
    }
    tokens = held_out(run.data, run.train_len, device=device)()[0][:64]  # (64, T)
    _, weights = model.attention_maps(tokens)
    query_norms, _ = mean_pair_norms(model, tokens)  # (L, H, D/2)
    energy = query_norms**2
    fast_share = energy[..., fast].sum(-1) / energy.sum(-1)  # (L, H)
    for layer, layer_weights in enumerate(weights):
        previous = offset_attention(layer_weights, 1).mean(0)  # (H,)
        for head in range(model.config.n_heads):
            numbers[f"previous_token_L{layer}H{head}"] = float(previous[head])
            numbers[f"fast_share_L{layer}H{head}"] = float(fast_share[layer, head])
    return numbers


MODEL: dict[str, Any] = {"dim": 64, "n_layers": 2, "n_heads": 2, "rope": Rope(32)}

COPY = make_run(
    "copy",
    CopyAtLag(lag=1, vocab=16),
    train_len=32,
    eval_lens=(32,),
    steps=150,
    eval_batches=2,
    analyse=frequency_analysis,
    **MODEL,
)
CORPUS = make_run(
    "corpus",
    CharCorpus(),
    train_len=64,
    eval_lens=(64,),
    steps=300,
    eval_batches=2,
    analyse=frequency_analysis,
    **MODEL,
)

SWEEP = Sweep(
    name="ch05_frequencies",
    version=1,
    description=(
        "Chapter 5: frequency use of a RoPE model on the lag-1 copy task and on the corpus; "
        "held-out loss with the fastest or slowest quarter of the pairs ablated."
    ),
    runs=(COPY, CORPUS),
    seeds=(0, 1, 2, 3, 4),
)
