r"""Does a trained RoPE model's attention decay with distance? The measurement.

Chapter 4 of the course. :func:`distance_profile` measures, per layer and head,
a trained model's mean attention logit, weight and unrotated score against
distance; :func:`decay_summary` reduces the profile to a few numbers per head,
and :func:`decay_numbers` stores them in a sweep (:func:`decay_run` is the
chapter's model). RoFormer's bound and its critique, which need no trained
model, are in :mod:`rope_lessons.chapters.decay_bounds`.

Conventions as everywhere in the course: a key at distance ``r`` sits ``r``
positions before the query, and its score is
:math:`\langle R_m q, R_{m-r} k\rangle = q^\top R_{-r} k`
(:func:`rope_lessons.rope.kernels.score_at_distance`, unscaled).

Shapes: ``R`` number of distances; ``L`` layers; ``H`` heads; ``B`` batch;
``T`` sequence length; ``D`` a model's head dimension.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch

from rope_lessons._checks import check_positive_int
from rope_lessons.evidence.runs import Run, make_run
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import QKV, TinyTransformer
from rope_lessons.toy.rotary_attention import _repeat_heads, attention, rotate_inputs
from rope_lessons.toy.synthetic import batch_sampler


class LogitTerms(NamedTuple):
    r"""A trained model's mean logit split in two: ``mean + rest``.

    ``mean`` is the rotary logit of the mean query and mean key (the mean term
    of :func:`~rope_lessons.chapters.decay_bounds.expected_score_terms`); ``rest``
    is everything else: the covariance term (:attr:`DistanceProfile.covariance`)
    plus cross terms that appear because a mean over all positions is not the
    mean over the queries and keys paired at one distance.
    """

    mean: torch.Tensor
    rest: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        """The mean logit, ``mean + rest``."""
        return self.mean + self.rest


@dataclass(frozen=True)
class DistanceProfile:
    """What a model's attention does with distance, averaged over a batch.

    Queries at positions ``max_distance .. T-1`` are paired with the keys at
    every distance ``r = 0 .. max_distance`` before them; each query therefore
    sees at least ``max_distance + 1`` keys, and every distance is averaged
    over the same queries (averaging over all queries instead would make
    uniform attention look like decay: short rows have large weights and only
    reach short distances).

    Attributes:
        distances: ``(R,)`` long, ``0 .. max_distance``.
        logit: ``(L, H, R)`` mean attention logit
            :math:`\\langle R_m q_m, R_n k_n\\rangle / \\sqrt D` at distance ``m - n``.
        weight: ``(L, H, R)`` mean attention weight.
        content: ``(L, H, R)`` mean unrotated score :math:`q_m^\\top k_n / \\sqrt D`:
            the same queries and keys with the positions removed.
        covariance: ``(L, H, R)`` mean rotary logit of the queries and keys less
            their means, :math:`(q_m - \\bar q)^\\top R_{n-m} (k_n - \\bar k) / \\sqrt D`:
            the covariance term. With :meth:`mean_vector_logit`, the mean term, it
            makes up :attr:`logit` up to cross terms that vanish when the queries
            and keys at each distance have the means of the whole batch.
        mean_query, mean_key: ``(L, H, D)`` means of the unrotated queries and
            keys over the batch and all positions (with grouped-query attention,
            each query head's key head).
        uniform_weight: the mean weight uniform attention would give (the same
            at every distance).
        rope: the model's RoPE spec.
    """

    distances: torch.Tensor
    logit: torch.Tensor
    weight: torch.Tensor
    content: torch.Tensor
    covariance: torch.Tensor
    mean_query: torch.Tensor
    mean_key: torch.Tensor
    uniform_weight: float
    rope: Rope

    def mean_vector_logit(self, distances: torch.Tensor | None = None) -> torch.Tensor:
        r"""The rotary logit of the mean query and key, :math:`\bar q^\top R_{-r} \bar k / \sqrt D`.

        The part of :attr:`logit` that the learned weights fix whatever the
        tokens: a query and key each split into its mean and a token-dependent
        rest contribute this term plus terms of the rests.

        Args:
            distances: integer tensor ``(R',)``; default :attr:`distances`.
                Distances beyond the trained context are allowed: they show
                what the learned mean vectors would do there.

        Returns:
            float64 tensor ``(L, H, R')``.
        """
        distances = self.distances if distances is None else distances
        scores = self.rope.score_at_distance(self.mean_query, self.mean_key, distances)
        return scores / math.sqrt(self.mean_query.shape[-1])

    def logit_terms(self) -> LogitTerms:
        r""":attr:`logit` split into the mean term and the rest.

        ``mean`` is :meth:`mean_vector_logit`; ``rest`` is :attr:`logit` minus
        it: what the token-dependent parts of the queries and keys add on
        average, that is :attr:`covariance` (the covariance term proper) plus
        the cross terms left because a mean over all positions is not the mean
        over the queries and keys paired at a given distance. Chapter 4's
        tables report this rest; chapter 9 reports the covariance term.

        Returns:
            :class:`LogitTerms` of two float64 tensors ``(L, H, R)``.
        """
        mean = self.mean_vector_logit()
        return LogitTerms(mean=mean, rest=self.logit - mean)


@torch.no_grad()
def distance_profile(
    model: TinyTransformer, tokens: torch.Tensor, max_distance: int | None = None
) -> DistanceProfile:
    """Mean attention logit, weight and unrotated score against distance, per layer and head.

    Args:
        model: a causal :class:`~rope_lessons.toy.model.TinyTransformer` with
            ``position="rope"``.
        tokens: ``(B, T)`` token ids (e.g. a validation batch).
        max_distance: the largest distance, ``< T``; default ``T // 2``.

    Returns:
        A :class:`DistanceProfile`; every tensor float64 on the CPU. The
        model is measured in eval mode and left in the mode it was in.
    """
    cfg = model.config
    if cfg.position != "rope" or cfg.placement != "qk" or cfg.nope_layers or not cfg.causal:
        raise ValueError(
            "distance_profile needs a causal model with position='rope', rope='qk' "
            "and no nope_layers"
        )
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
        raise TypeError("tokens must be an integer tensor of shape (batch, seq)")
    rope = cfg.rope
    if rope is None:  # position="rope" was checked above; this narrows the type
        raise ValueError("distance_profile needs position='rope'")
    was_training = model.training
    model.eval()  # dropout off while measuring; the caller's mode comes back below
    try:
        layers_qkv = model.layer_qkv(tokens)
        _, weights = model.attention_maps(tokens)
    finally:
        model.train(was_training)
    return qkv_distance_profile(layers_qkv, rope, max_distance, weights=weights)


@torch.no_grad()
def qkv_distance_profile(
    layers_qkv: Sequence[QKV],
    rope: Rope,
    max_distance: int | None = None,
    *,
    weights: Sequence[torch.Tensor] | None = None,
) -> DistanceProfile:
    """:func:`distance_profile` of any causal QK-RoPE model, from its queries and keys.

    Works on every model whose ``layer_qkv`` gives unrotated ``(B, H, T, D)``
    queries and ``(B, H_kv, T, D)`` keys and values (``H_kv`` dividing ``H``:
    each key head serves ``H / H_kv`` query heads, as in grouped-query
    attention), e.g. :class:`~rope_lessons.toy.model.TinyTransformer` and
    :class:`rope_lessons.real.pretrained.Pretrained`. Per-head means of the keys
    are reported per query head.

    Args:
        layers_qkv: one :class:`~rope_lessons.toy.model.QKV` per layer, positions ``0 .. T-1``.
        rope: the spec the model rotates with.
        max_distance: the largest distance, ``< T``; default ``T // 2``.
        weights: the model's attention weights per layer, ``(B, H, T, T)``; default:
            computed from the queries and keys with causal
            :func:`~rope_lessons.toy.rotary_attention.attention`.

    Returns:
        A :class:`DistanceProfile`; every tensor float64 on the CPU.
    """
    if not layers_qkv:
        raise ValueError("layers_qkv must hold at least one layer")
    seq_len = layers_qkv[0].q.shape[-2]
    max_distance = seq_len // 2 if max_distance is None else max_distance
    max_distance = check_positive_int(max_distance, "max_distance")
    if max_distance >= seq_len:
        raise ValueError(f"max_distance must be < seq = {seq_len}, got {max_distance}")
    device = layers_qkv[0].q.device
    queries = torch.arange(max_distance, seq_len, device=device)  # (M,)
    distances = torch.arange(max_distance + 1, device=device)  # (R,)
    keys = queries[:, None] - distances[None, :]  # (M, R)

    def by_distance(matrix: torch.Tensor) -> torch.Tensor:
        """(B, H, T, T) -> (H, R): mean over the batch and the queries."""
        return matrix[..., queries[:, None], keys].double().mean(dim=(0, 2)).cpu()

    logit, weight, content, centred, mean_query, mean_key = [], [], [], [], [], []
    for index, qkv in enumerate(layers_qkv):
        heads = qkv.q.shape[1]
        scale = math.sqrt(qkv.q.shape[-1])
        q_rot, k_rot, _ = rotate_inputs(*qkv, rope=rope)
        k_rot, _ = _repeat_heads(k_rot, k_rot, heads)  # (B, H, T, D): one key head per query head
        k, _ = _repeat_heads(qkv.k, qkv.k, heads)
        logit.append(by_distance(q_rot @ k_rot.transpose(-2, -1) / scale))
        content.append(by_distance(qkv.q @ k.transpose(-2, -1) / scale))
        if weights is None:
            layer_weights = attention(*qkv, rope=rope, return_weights=True)[1]
        else:
            layer_weights = weights[index]
        weight.append(by_distance(layer_weights))
        q_mean = qkv.q.mean(dim=(0, 2), keepdim=True)  # (1, H, 1, D)
        k_mean = k.mean(dim=(0, 2), keepdim=True)
        q_rest, k_rest, _ = rotate_inputs(qkv.q - q_mean, k - k_mean, k, rope=rope)
        centred.append(by_distance(q_rest @ k_rest.transpose(-2, -1) / scale))
        mean_query.append(qkv.q.double().mean(dim=(0, 2)).cpu())  # (H, D)
        mean_key.append(k.double().mean(dim=(0, 2)).cpu())
    uniform = (1.0 / (queries.double() + 1.0)).mean().item()
    return DistanceProfile(
        distances=distances.cpu(),
        logit=torch.stack(logit),
        weight=torch.stack(weight),
        content=torch.stack(content),
        covariance=torch.stack(centred),
        mean_query=torch.stack(mean_query),
        mean_key=torch.stack(mean_key),
        uniform_weight=uniform,
        rope=rope,
    )


def span_mean(curve: torch.Tensor, span: tuple[int, int], name: str = "span") -> torch.Tensor:
    """Mean of ``curve`` over the distances ``span = (first, last)``, both included.

    Args:
        curve: ``(..., R)`` indexed by distance ``0 .. R-1``.
        span: ``(first, last)`` with ``0 <= first <= last < R``.
        name: the argument's name in error messages.

    Returns:
        Tensor ``(...,)``.
    """
    first, last = span
    if not 0 <= first <= last < curve.shape[-1]:
        raise ValueError(f"{name} must satisfy 0 <= first <= last < {curve.shape[-1]}, got {span}")
    return curve[..., first : last + 1].mean(-1)


def near_minus_far(
    curve: torch.Tensor, near: tuple[int, int], far: tuple[int, int]
) -> torch.Tensor:
    """Mean of ``curve`` over the distances ``near`` minus its mean over ``far``.

    A one-number summary of decay: positive when short distances score higher.
    """
    return span_mean(curve, near, "near") - span_mean(curve, far, "far")


SUMMARY_NAMES = ("logit", "content", "mean_vector", "rest", "log_weight_ratio")
"""The per-head numbers of :func:`decay_summary`, in order."""


def decay_summary(
    profile: DistanceProfile, near: tuple[int, int] = (1, 4), far: tuple[int, int] | None = None
) -> dict[str, torch.Tensor]:
    """Per-head numbers that say whether, and through what, attention decays with distance.

    Args:
        profile: from :func:`distance_profile`.
        near: distances averaged as "near" (default 1 to 4: the token itself,
            distance 0, is often special and left out).
        far: distances averaged as "far"; default the second half of the
            profile's range, ``max_distance // 2 .. max_distance``.

    Returns:
        Five ``(L, H)`` float64 tensors, keyed by :data:`SUMMARY_NAMES`:
        ``"logit"``, the near-minus-far drop of the mean attention logit;
        ``"content"``, the same for the unrotated score (positions removed);
        ``"mean_vector"``, the same for the rotary logit of the mean query and
        key (the mean term of :meth:`DistanceProfile.logit_terms`);
        ``"rest"``, the same for the rest of :meth:`DistanceProfile.logit_terms`
        (the covariance term plus cross terms, so ``logit = mean_vector + rest``);
        ``"log_weight_ratio"``, the natural log of the mean attention weight
        near over the mean weight far (0: no preference; a log keeps the stored
        numbers of a sweep on one scale).
    """
    if far is None:
        last = int(profile.distances[-1])
        far = (last // 2, last)
    terms = profile.logit_terms()
    return {
        "logit": near_minus_far(profile.logit, near, far),
        "content": near_minus_far(profile.content, near, far),
        "mean_vector": near_minus_far(terms.mean, near, far),
        "rest": near_minus_far(terms.rest, near, far),
        "log_weight_ratio": (
            span_mean(profile.weight, near, "near") / span_mean(profile.weight, far, "far")
        ).log(),
    }


ANALYSIS_SEQUENCES = 64  # validation sequences that decay_numbers averages over


def decay_key(name: str, layer: int, head: int) -> str:
    """The key under which :func:`decay_numbers` stores one number of one head."""
    return f"layer {layer} head {head}: {name}"


def flatten_summary(summary: dict[str, torch.Tensor]) -> dict[str, float]:
    """``(L, H)`` tables by name -> flat numbers under :func:`decay_key`, as a sweep stores them."""
    return {
        decay_key(name, layer, head): float(values[layer, head])
        for name, values in summary.items()
        for layer in range(values.shape[0])
        for head in range(values.shape[1])
    }


def decay_numbers(
    model: TinyTransformer, run: Run[TinyTransformer], device: torch.device
) -> dict[str, float]:
    """:func:`decay_summary` of a trained model as flat numbers: a stored sweep's ``analyse`` hook.

    The profile is measured on one fixed batch of :data:`ANALYSIS_SEQUENCES`
    validation sequences of length ``run.train_len``, the same for every seed.

    Returns:
        :func:`flatten_summary` of the summary: ``decay_key(NAME, L, H)`` for every
        NAME of :data:`SUMMARY_NAMES`, layer and head;
        :func:`summary_from_numbers` reads it back.
    """
    sample = batch_sampler(run.data, ANALYSIS_SEQUENCES, run.train_len, seed=0, split="val")
    tokens, _ = sample()
    return flatten_summary(decay_summary(distance_profile(model, tokens.to(device))))


def summary_from_numbers(numbers: dict[str, float]) -> dict[str, torch.Tensor]:
    """The inverse of :func:`decay_numbers`: ``(L, H)`` float64 tensors by name.

    The keys are looked up, not parsed: the layers and heads are counted by
    asking for :func:`decay_key` of ``"logit"`` at layer 0, 1, ... and head 0,
    1, ... until one is missing, and then every name of :data:`SUMMARY_NAMES` must
    be present for every layer and head, and nothing else.
    """
    layers = 0
    while decay_key("logit", layers, 0) in numbers:
        layers += 1
    heads = 0
    while decay_key("logit", 0, heads) in numbers:
        heads += 1
    if layers == 0:
        raise ValueError("not decay_numbers: no 'layer 0 head 0: logit'")
    expected = {
        decay_key(name, layer, head)
        for name in SUMMARY_NAMES
        for layer in range(layers)
        for head in range(heads)
    }
    if set(numbers) != expected:
        missing = sorted(expected - set(numbers))[:3]
        unknown = sorted(set(numbers) - expected)[:3]
        raise ValueError(
            f"not decay_numbers of {layers} layers x {heads} heads: "
            f"missing {missing}, unknown {unknown}"
        )
    return {
        name: torch.tensor(
            [
                [numbers[decay_key(name, layer, head)] for head in range(heads)]
                for layer in range(layers)
            ],
            dtype=torch.float64,
        )
        for name in SUMMARY_NAMES
    }


def decay_run(steps: int = 1500) -> Run[TinyTransformer]:
    """The chapter's trained model: a small causal RoPE language model on the course's corpus.

    Two layers of width 64 with four heads of dimension 16 (8 rotary pairs,
    base 10000, interleaved), trained on :class:`~rope_lessons.toy.corpus.CharCorpus`
    at context 128 with batches of 16 for ``steps`` steps, evaluated on 256
    validation sequences of length 128, and analysed by :func:`decay_numbers`.
    """
    return make_run(
        "rope, corpus",
        CharCorpus(),
        train_len=128,
        eval_lens=(128,),
        steps=steps,
        batch_size=16,
        eval_batches=1,
        analyse=decay_numbers,
        dim=64,
        n_layers=2,
        n_heads=4,
    )
