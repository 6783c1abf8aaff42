r"""RoFormer's decay bound and its critique, as formulas and Monte Carlo on random vectors.

Chapter 4 of the course. RoFormer (Su et al., arXiv:2104.09864, section 3.4.3)
bounds the rotary score with an Abel summation and plots the bound's relative
size, :func:`roformer_bound`, which falls with distance. Barbero et al.
("Round and Round We Go!", ICLR 2025, arXiv:2410.06205, section 3) answer that
the bound says little about actual scores: independent Gaussian queries and
keys score 0 on average at every distance (:func:`monte_carlo_score`), and for
any query there is a key whose score peaks at any chosen distance
(:func:`peaked_key`). :func:`expected_score_terms` gives the expected score
from the first two moments of queries and keys. Nothing here needs a trained
model; :mod:`rope_lessons.chapters.decay` measures what a trained model does.

Conventions as everywhere in the course: pair ``k`` turns at
:math:`\theta_k = b^{-2k/d}`; a key at distance ``r`` sits ``r`` positions
before the query, and its score is
:math:`\langle R_m q, R_{m-r} k\rangle = q^\top R_{-r} k`
(:func:`rope_lessons.rope.kernels.score_at_distance`, unscaled).

Shapes: ``...`` any leading dimensions; ``d`` head dimension (even);
``R`` number of distances.
"""

from __future__ import annotations

import math
import operator
from typing import NamedTuple, SupportsIndex

import torch

from rope_lessons._checks import (
    check_even_dim,
    check_features,
    check_positions,
    check_positive_int,
)
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope

MAX_DISTANCE = 10**9
r"""The largest distance the functions of this module accept.

Phases :math:`r\theta_k` are computed in float64, whose rounding error is
about :math:`r\theta_k \cdot 2^{-52}` radians (:math:`\theta_0 = 1` is the
largest frequency). At :math:`r = 10^9` that is :math:`2 \cdot 10^{-7}` rad; at
:math:`r = 10^{15}` it is a tenth of a radian, and a score computed there
means nothing.
"""


def _check_distances(distances: object) -> torch.Tensor:
    """Return ``distances`` as int64 if it is an integer tensor of values in
    ``0 .. MAX_DISTANCE``."""
    distances = check_positions(distances, name="distances")
    if bool((distances < 0).any()):
        raise ValueError("distances must be >= 0 (a key r positions before the query)")
    if distances.numel():
        _check_farthest(int(distances.max()), "distances")
    return distances


def _check_farthest(farthest: int, name: str) -> None:
    """Refuse a largest distance ``farthest`` beyond :data:`MAX_DISTANCE`; ``name`` says
    what it is in the message."""
    if farthest > MAX_DISTANCE:
        raise ValueError(
            f"{name} must be <= {MAX_DISTANCE:.0e}, got {farthest}: "
            "beyond it the float64 phases r * theta_k err by more than 2e-7 rad "
            "(about r * 2^-52), and at 1e15 by a tenth of a radian"
        )


def _check_vector(x: object, name: str) -> torch.Tensor:
    """Return ``x`` if it is a floating tensor ``(..., d)`` with ``d`` even."""
    if isinstance(x, torch.Tensor) and x.ndim == 1:
        return check_features(x[None], name)[0]
    return check_features(x, name)


def roformer_bound(distances: torch.Tensor, d: int, base: float = 10000.0) -> torch.Tensor:
    r"""RoFormer's relative upper bound on the score at each distance.

    With :math:`S_j(r) = \sum_{k<j} e^{i r\theta_k}` (so :math:`S_0 = 0`), the
    Abel summation of RoFormer's eq. 36 gives
    :math:`|\text{score}| \le \max_k |h_{k+1} - h_k| \sum_{j=1}^{d/2} |S_j(r)|`
    (see :func:`abel_bound`). This function returns the factor that depends on
    the distance alone, relative to the number of pairs,

    .. math:: \frac{1}{d/2} \sum_{j=1}^{d/2} \Bigl|\sum_{k<j} e^{i r\theta_k}\Bigr|,

    which RoFormer plots in its Figure 2. At ``r = 0`` every term is 1, so the
    bound is :math:`(d/2 + 1)/2`.

    Args:
        distances: integer tensor ``(...,)`` of distances ``r >= 0``.
        d: the head dimension (even).
        base: the frequency base.

    Returns:
        float64 tensor of the shape of ``distances``.
    """
    distances = _check_distances(distances)
    d = check_even_dim(d, "d")
    return _mean_partial_sum(distances, frequencies(d, base))


def _mean_partial_sum(distances: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    r""":math:`\frac{1}{d/2}\sum_j |S_j(r)|` for checked ``distances`` ``(...,)`` and
    frequencies ``theta`` ``(d/2,)``; float64 ``(...,)``."""
    theta = theta.to(distances.device, torch.float64)
    angles = distances.to(torch.float64).unsqueeze(-1) * theta  # (..., d/2)
    partial_sums = torch.polar(torch.ones_like(angles), angles).cumsum(-1)  # S_1 .. S_{d/2}
    return partial_sums.abs().mean(-1)


def abel_bound(
    q: torch.Tensor,
    k: torch.Tensor,
    distances: torch.Tensor,
    *,
    rope: Rope | None = None,
) -> torch.Tensor:
    r"""RoFormer's full bound :math:`\max_k |h_{k+1} - h_k| \cdot \sum_j |S_j(r)|`.

    Here :math:`h_k = z_k(q)\,\overline{z_k(k)}` for each pair (see
    :func:`~rope_lessons.rope.kernels.read_pairs`) and :math:`h_{d/2} = 0`, as in RoFormer's eq. 36.
    For every ``q``, ``k`` and ``r``,
    ``|score_at_distance(q, k, r)| <= abel_bound(q, k, r)``.

    Args:
        q, k: ``(..., d)``, broadcastable, of the same ``d``; any floating
            dtype (half precision is widened to float64 first).
        distances: integer tensor ``(R,)``, values in ``0 .. MAX_DISTANCE``.
        rope: the spec whose pairs and frequencies are used; default ``Rope(d)``.

    Returns:
        float64 tensor ``(..., R)``.
    """
    q, k = _check_vector(q, "q"), _check_vector(k, "k")
    d = q.shape[-1]
    if k.shape[-1] != d:
        raise ValueError(f"q and k must have the same last dimension, got {d} and {k.shape[-1]}")
    rope = Rope(d) if rope is None else rope
    rope.check_dim(d, "the last dimension of q")
    distances = _check_distances(distances)
    if distances.ndim != 1:
        raise ValueError(f"distances must be 1-D (R,), got shape {tuple(distances.shape)}")
    # float16 and bfloat16 inputs are read exactly in float64 (the bound is float64)
    h = rope.pairs(q.double()) * rope.pairs(k.double()).conj()
    # h: (..., d/2) complex128; steps: |h_{k+1} - h_k| with h_{d/2} = 0
    steps = torch.diff(h, dim=-1, append=torch.zeros_like(h[..., :1])).abs()
    return steps.amax(-1, keepdim=True) * (d // 2) * _mean_partial_sum(distances, rope.theta)


def peaked_key(
    q: torch.Tensor,
    r: SupportsIndex,
    *,
    rope: Rope | None = None,
) -> torch.Tensor:
    r"""A key of the norm of ``q`` whose score against ``q`` is largest at distance ``r``.

    The construction of Barbero et al.'s Proposition 3.1: :math:`k = R_r q`.
    At distance ``s`` the score is

    .. math:: q^\top R_{-s} R_r q = q^\top R_{r-s}\, q
              = \sum_k |z_k|^2 \cos\bigl((r - s)\theta_k\bigr) \le \lVert q\rVert^2,

    with equality at ``s = r``. At any other integer ``s`` it is strictly
    smaller: equality would need :math:`(r-s)\theta_k \in 2\pi\mathbb{Z}` for
    every pair with :math:`z_k \ne 0`, and :math:`\theta_k / 2\pi` is
    irrational (:math:`\theta_k` is algebraic and :math:`\pi` is not). So the
    peak at ``r`` is unique among all integer distances, not only among
    ``0 .. 10^5``.

    Args:
        q: queries ``(..., d)``, floating, every vector nonzero.
        r: the distance at which the score should peak, an integer >= 0 (a
            Python ``int``, a numpy integer or anything with ``__index__``).
        rope: the spec that turns ``q``; default ``Rope(d)``.

    Returns:
        Keys of the shape and dtype of ``q``.
    """
    q = _check_vector(q, "q")
    if isinstance(r, bool) or not hasattr(r, "__index__"):
        raise TypeError(f"r must be an integer, got {type(r).__name__}")
    distance = operator.index(r)  # Python, numpy and 0-d integer tensors alike
    if distance < 0:
        raise ValueError(f"r must be >= 0 (a key r positions before the query), got {distance}")
    if bool((q.norm(dim=-1) == 0).any()):
        raise ValueError("q contains a zero vector: its score is 0 at every distance, no key peaks")
    rope = Rope(q.shape[-1]) if rope is None else rope
    rotated = rope.apply(q.unsqueeze(-2), torch.tensor([distance]), scale=False)  # (..., 1, d)
    return rotated.squeeze(-2)  # (..., d)


def attention_by_distance(
    q: torch.Tensor,
    k: torch.Tensor,
    context: int,
    *,
    rope: Rope | None = None,
) -> torch.Tensor:
    r"""The attention a query pays to ``context`` copies of the same key, by distance.

    The query stands at position ``context - 1`` and the key ``k`` at every
    position ``0 .. context - 1``; entry ``r`` is the softmax weight, with the
    usual :math:`1/\sqrt d` scaling, on the copy ``r`` positions back.
    This is one row of causal :func:`rope_lessons.toy.rotary_attention.attention`,
    computed from :func:`rope_lessons.rope.kernels.score_at_distance` so that long
    contexts cost ``O(context)`` instead of ``O(context^2)``.

    Args:
        q, k: ``(..., d)``.
        context: number of keys, >= 1.
        rope: the spec; default ``Rope(d)``.

    Returns:
        float64 tensor ``(..., context)`` whose last dimension sums to 1.

    Raises:
        ValueError: ``context < 1``, or ``context - 1`` (the farthest distance)
            beyond :data:`MAX_DISTANCE`; refused before any tensor is built.
    """
    context = check_positive_int(context, "context")
    _check_farthest(context - 1, "the farthest distance, context - 1,")
    distances = torch.arange(context, device=q.device)
    rope = Rope(q.shape[-1]) if rope is None else rope
    scores = rope.score_at_distance(q, k, distances)  # (..., context)
    return (scores / math.sqrt(q.shape[-1])).softmax(-1)


class MonteCarloScore(NamedTuple):
    """The mean score at each distance over random samples, and its standard error."""

    mean: torch.Tensor
    stderr: torch.Tensor


def monte_carlo_score(
    d: int,
    distances: torch.Tensor,
    *,
    samples: int = 4096,
    correlation: float = 0.0,
    seed: int = 0,
    rope: Rope | None = None,
    chunk: int = 1024,
) -> MonteCarloScore:
    r"""Monte Carlo estimate of :math:`E[q^\top R_{-r} k]` for Gaussian ``q``, ``k``.

    ``q ~ N(0, I_d)`` and ``k = c\,q + \sqrt{1 - c^2}\,\varepsilon`` with
    ``ε ~ N(0, I_d)`` independent and ``c = correlation``. The exact
    expectation is :math:`c \operatorname{tr} R_r = c \sum_k 2\cos(r\theta_k)`:
    zero for independent ``q``, ``k`` (``c = 0``, Barbero et al.'s
    Proposition 3.2), and ``c`` times the all-ones score when the key is a
    noisy copy of the query. One sample has variance
    :math:`(1 - c^2)\,d + 4c^2 \sum_k \cos^2(r\theta_k)` (``d`` when
    ``c = 0``); the standard error is the sample standard deviation over
    :math:`\sqrt{\text{samples}}`.

    Args:
        d: head dimension (even).
        distances: integer tensor ``(R,)``, values >= 0.
        samples: number of ``(q, k)`` pairs, >= 2.
        correlation: ``c`` in ``[-1, 1]``.
        seed: seeds a private generator, so the estimate is reproducible.
        rope: the spec, of dimension ``d``; default ``Rope(d)``.
        chunk: pairs scored at once (bounds memory to ``chunk * R`` floats).

    Returns:
        :class:`MonteCarloScore` of two float64 tensors ``(R,)``.
    """
    d = check_even_dim(d, "d")
    rope = Rope(d) if rope is None else rope
    rope.check_dim(d, "d")
    distances = _check_distances(distances)
    samples = check_positive_int(samples, "samples")
    if samples < 2:
        raise ValueError(f"samples must be >= 2 for a standard error, got {samples}")
    if isinstance(correlation, bool) or not isinstance(correlation, (int, float)):
        raise TypeError(f"correlation must be a number, got {type(correlation).__name__}")
    if not -1.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must lie in [-1, 1], got {correlation}")
    chunk = check_positive_int(chunk, "chunk")
    generator = torch.Generator().manual_seed(seed)
    total = torch.zeros(distances.shape, dtype=torch.float64)
    total_sq = torch.zeros(distances.shape, dtype=torch.float64)
    for start in range(0, samples, chunk):
        n = min(chunk, samples - start)
        q = torch.randn(n, d, generator=generator, dtype=torch.float64)
        noise = torch.randn(n, d, generator=generator, dtype=torch.float64)
        k = correlation * q + math.sqrt(1.0 - correlation**2) * noise
        scores = rope.score_at_distance(q, k, distances)  # (n, R)
        total += scores.sum(0)
        total_sq += scores.square().sum(0)
    mean = total / samples
    variance = (total_sq - samples * mean.square()).clamp(min=0.0) / (samples - 1)
    return MonteCarloScore(mean, (variance / samples).sqrt())


class ScoreTerms(NamedTuple):
    r"""An expected score split in two: :math:`E[s(r)] =` ``mean + covariance``.

    ``mean`` is the rotary score of the mean query and mean key,
    :math:`\mu_q^\top R_{-r}\mu_k`; ``covariance`` is what the variation of
    queries and keys around their means adds (see :func:`expected_score_terms`).
    """

    mean: torch.Tensor
    covariance: torch.Tensor

    @property
    def total(self) -> torch.Tensor:
        """The expected score, ``mean + covariance``."""
        return self.mean + self.covariance


def expected_score_terms(
    mean_q: torch.Tensor,
    mean_k: torch.Tensor,
    cross_covariance: torch.Tensor,
    distances: torch.Tensor,
    *,
    rope: Rope | None = None,
) -> ScoreTerms:
    r"""The expected rotary score of random ``q``, ``k`` from their first two moments.

    With :math:`M = E[q k^\top] = C + \mu_q \mu_k^\top` (``C`` the cross-covariance,
    :math:`C_{ij} = \operatorname{Cov}(q_i, k_j)`), the score is linear in
    :math:`q k^\top`, so

    .. math:: E[q^\top R_{-r} k] = \sum_{ij} M_{ij} (R_{-r})_{ij}
              = \sum_i e_i^\top R_{-r} M_{i\cdot}
              = \operatorname{Re} \sum_k (C_k + m_k) e^{i r\theta_k},

    where :math:`m_k = z_k(\mu_q)\,\overline{z_k(\mu_k)}` and :math:`C_k =
    E[z_k(q - \mu_q)\,\overline{z_k(k - \mu_k)}]` (the convention of
    :func:`~rope_lessons.rope.kernels.score_at_distance`: :math:`s(r) = \operatorname{Re}
    \sum_k z_k(q)\overline{z_k(k)} e^{ir\theta_k}`). The formula is applied to each
    part of :math:`M`: the mean term :math:`\mu_q^\top R_{-r}\mu_k` is the score of
    the means, the covariance term the same sum over the rows of ``C``.
    Independent ``q`` and ``k`` have ``C = 0`` but keep the mean term,
    :math:`\operatorname{Re} \sum_k m_k e^{ir\theta_k}`: their expected score is
    zero at every distance when :math:`m_k = 0` in every pair ``k`` (and, for
    distinct frequencies in :math:`(0, \pi)` such as RoPE's ladder, only then).
    A zero mean is one way; means in different pairs are another (:math:`\mu_q`
    only on pair 0, :math:`\mu_k` only on pair 1: neither is zero, every
    :math:`m_k` is).

    Args:
        mean_q, mean_k: ``(..., d)``, floating.
        cross_covariance: floating tensor ``(..., d, d)``, row ``i`` the covariances
            of :math:`q_i` with every coordinate of ``k``.
        distances: integer tensor ``(R,)``, values in ``0 .. MAX_DISTANCE``.
        rope: the spec; default ``Rope(d)``.

    Returns:
        :class:`ScoreTerms` of two float64 tensors ``(..., R)``.
    """
    mean_q, mean_k = _check_vector(mean_q, "mean_q"), _check_vector(mean_k, "mean_k")
    if not isinstance(cross_covariance, torch.Tensor):
        raise TypeError(
            f"cross_covariance must be a torch.Tensor, got {type(cross_covariance).__name__}"
        )
    if not cross_covariance.is_floating_point():
        raise TypeError(
            f"cross_covariance must have a floating dtype, got {cross_covariance.dtype}"
        )
    d = mean_q.shape[-1]
    if mean_k.shape[-1] != d or cross_covariance.shape[-2:] != (d, d):
        raise ValueError(
            f"mean_q {tuple(mean_q.shape)}, mean_k {tuple(mean_k.shape)} and "
            f"cross_covariance {tuple(cross_covariance.shape)} must share d, "
            "with cross_covariance (..., d, d)"
        )
    rope = Rope(d) if rope is None else rope
    rope.check_dim(d, "the last dimension of mean_q")
    distances = _check_distances(distances)
    basis = torch.eye(d, dtype=torch.float64, device=mean_q.device)  # rows e_i
    rows = rope.score_at_distance(basis, cross_covariance.double(), distances)  # (..., d, R)
    return ScoreTerms(
        mean=rope.score_at_distance(mean_q.double(), mean_k.double(), distances),
        covariance=rows.sum(-2),
    )
