"""Chapter 8's toy experiments: a trained model read with a new spec, and how it does.

* :func:`extended`: a copy of a trained model with a new spec (frequencies
  and attention factor: YaRN's, on the queries and keys of its rotary layers,
  as Hugging Face applies it; the specs come from
  :func:`~rope_lessons.rope.scaled_specs.scaled_frequencies`) and optionally
  Su's log-length scaling of the queries
  (:func:`~rope_lessons.rope.scaling.log_length_scale`);
* :func:`token_losses`, :func:`band_edges` and :func:`band_losses`: held-out
  loss per position and per position band; :func:`attention_entropy`: the
  entropy of each layer's attention rows;
* :func:`fine_tune`: a short fine-tune of an extended model at the new length.

Shapes: ``B`` batch, ``T`` sequence length, ``H`` heads, ``C`` model width.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Collection, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rope_lessons._checks import (
    check_bands,
)
from rope_lessons.evidence.training import train
from rope_lessons.rope.scaling import _integer, log_length_scale
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import SelfAttention, TinyTransformer
from rope_lessons.toy.rotary_attention import Local
from rope_lessons.toy.synthetic import Batch, Task, batch_sampler


def extended(
    model: TinyTransformer,
    rope: Rope | None = None,
    *,
    log_scale_from: int | None = None,
    rope_local: Local | None = None,
) -> TinyTransformer:
    r"""A copy of a trained RoPE model with a new spec and attention scaling.

    Args:
        model: a trained :class:`~rope_lessons.toy.model.TinyTransformer` with
            ``position="rope"`` (left unchanged).
        rope: the new spec (e.g. from :func:`~.scaled_frequencies`), of the
            model's head dimension and layout; None keeps the model's. Its
            frequencies replace the model's whole ladder (p-RoPE's cut
            included), and its attention factor multiplies the queries and
            keys of every rotary layer (so the logits by its square), as
            Hugging Face applies YaRN's factor; the model's NoPE layers
            (``nope_layers``) keep factor 1.
        log_scale_from: if given (the trained length ``L``), the query at
            position ``m`` is also multiplied by
            :math:`\max(1, \log(m+1)/\log L)`: Su's log-length scaling, which
            keeps the attention's entropy from growing with the number of keys.
        rope_local: if given, the rotating layers attend only within this
            window or chunk (:attr:`~rope_lessons.toy.model.ModelConfig.rope_local`;
            e.g. ``Local(L)``: a sliding window of the trained length, or, on a
            model with NoPE layers, Llama 4's chunked RoPE layers at read time).

    Returns:
        a new model in eval mode. The attention factor acts through the spec
        in its config; the log-length scale is a forward hook on each layer's
        query-key-value projection. Both also act while fine-tuning.
    """
    if not isinstance(model, TinyTransformer) or model.config.position != "rope":
        raise TypeError("model must be a TinyTransformer with position='rope'")
    if rope is not None and not isinstance(rope, Rope):
        raise TypeError(f"rope must be a Rope spec or None, got {type(rope).__name__}")
    if log_scale_from is not None:
        log_scale_from = _integer(log_scale_from, "log_scale_from")
        if log_scale_from < 2:
            raise ValueError(
                f"log_scale_from must be >= 2 (log of it divides), got {log_scale_from}"
            )
    config = model.config
    if rope is not None:
        rope.check_dim(config.head_dim, "the model's head dimension")
        layout = "interleaved" if config.rope is None else config.rope.layout
        if rope.layout != layout:
            raise ValueError(
                f"the spec's layout is {rope.layout!r} and the model's {layout!r}: "
                "its trained weights pair their dimensions in the model's layout; build the "
                "spec in it (or convert the model with rope_lessons.toy.layouts.convert_layout)"
            )
        # the new frequencies replace the whole ladder, p-RoPE's cut included
        config = dataclasses.replace(config, rope=rope)
    if rope_local is not None:  # ModelConfig checks that it is a Local
        config = dataclasses.replace(config, rope_local=rope_local)
    copy = TinyTransformer(config).to(next(model.parameters()).device)
    copy.load_state_dict(model.state_dict())
    copy.eval()
    if rope is not None and rope.attention_factor != 1.0 and config.nope_layers:
        # the factor belongs to the rotated queries and keys: the NoPE layers keep 1
        unscaled = dataclasses.replace(config, rope=Rope.from_theta(rope.theta, rope.layout))
        for layer in config.nope_layers:
            block = copy.blocks[layer]
            if not isinstance(block.attn, SelfAttention):
                raise TypeError(f"layer {layer} has no SelfAttention")
            block.attn.config = unscaled
    if log_scale_from is not None:
        for module in copy.modules():
            if isinstance(module, SelfAttention):
                module.qkv.register_forward_hook(_query_log_scaling(module.widths, log_scale_from))
    return copy


def _query_log_scaling(
    widths: tuple[int, ...], log_scale_from: int
) -> Callable[[nn.Module, tuple[torch.Tensor, ...], torch.Tensor], torch.Tensor]:
    """A forward hook that multiplies the query at position ``m`` by :func:`log_length_scale`.

    It sits on a query-key-value projection whose output ``(B, T, sum(widths))`` holds
    the column blocks ``widths`` (:attr:`~rope_lessons.toy.model.SelfAttention.widths`): the
    queries ``(B, T, C)`` first, which it scales, then the keys and values, which pass.
    """

    def hook(
        module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor
    ) -> torch.Tensor:
        q, *kv = output.split(widths, dim=-1)  # (B, T, C), then (B, T, H_kv * D) each
        scale = log_length_scale(output.shape[-2], log_scale_from)  # (T,)
        return torch.cat([q * scale.to(q.device, q.dtype)[:, None], *kv], dim=-1)

    return hook


def token_losses(model: nn.Module, batches: Sequence[Batch]) -> torch.Tensor:
    """Mean cross-entropy at each position over ``batches`` of ``(tokens, targets)``.

    Returns:
        float64 tensor ``(T,)``: the loss at position ``t`` averaged over all
        sequences (every target scored: a corpus has no ignored positions).
    """
    model.eval()
    total: torch.Tensor | None = None
    count = 0
    with torch.no_grad():
        for tokens, targets in batches:
            logits = model(tokens)  # (B, T, V)
            loss = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, T)
            summed = loss.double().sum(0).cpu()
            total = summed if total is None else total + summed
            count += tokens.shape[0]
    if total is None:
        raise ValueError("batches must hold at least one batch")
    return total / count


def band_edges(original_length: int, factor: int) -> list[tuple[int, int]]:
    """Position bands ``[0, L), [L, 2L), [2L, 4L), ...`` up to ``factor * L``.

    ``factor`` must be a power of two, e.g. 8: four bands, trained range, 2x, 4x, 8x.
    NumPy's integers are accepted like Python's (not bools or floats).
    """
    original_length = _integer(original_length, "original_length")
    factor = _integer(factor, "factor")
    if factor & (factor - 1):
        raise ValueError(f"factor must be a power of two, got {factor}")
    edges = [0] + [original_length * 2**i for i in range(int(math.log2(factor)) + 1)]
    return list(itertools.pairwise(edges))


def band_losses(per_position: torch.Tensor, bands: Sequence[tuple[int, int]]) -> list[float]:
    """The mean of ``per_position`` ``(T,)`` over each band ``[start, stop)``, which must
    lie within ``[0, T)``."""
    check_bands(bands, per_position.shape[-1])
    return [float(per_position[start:stop].mean()) for start, stop in bands]


def attention_entropy(model: TinyTransformer, tokens: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of every attention row, averaged over batch, heads and layers.

    Args:
        tokens: ``(B, T)`` token ids.

    Returns:
        float64 tensor ``(T,)``: the mean entropy of the query at each position.
    """
    with torch.no_grad():
        _, maps = model.attention_maps(tokens)  # each (B, H, T, T)
    entropies = [
        -(w.double() * torch.log(w.double().clamp_min(1e-30))).sum(-1).mean((0, 1)) for w in maps
    ]
    return torch.stack(entropies).mean(0).cpu()


def fine_tune(
    model: TinyTransformer,
    data: Task,
    *,
    length: int,
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    warmup: int | None = None,
    checkpoints: Collection[int] = (),
    on_checkpoint: Callable[[int], None] | None = None,
) -> TinyTransformer:
    """Train ``model`` further, in place, on ``data``'s training split at ``length``.

    The short fine-tune of the extension papers: the model keeps its (new)
    frequencies and hooks and sees sequences longer than it was trained on.
    ``warmup``, ``checkpoints`` and ``on_checkpoint`` are those of
    :func:`~rope_lessons.evidence.training.train` (e.g. to read a fine-tune curve off one run).

    Returns:
        the same model, in eval mode.
    """
    sampler = batch_sampler(
        data, batch_size, length, seed=seed, device=next(model.parameters()).device
    )
    train(
        model,
        sampler,
        steps=steps,
        lr=lr,
        warmup=warmup,
        progress=False,
        checkpoints=checkpoints,
        on_checkpoint=on_checkpoint,
    )
    return model
