r"""Attention without a position encoding (NoPE): its symmetry, and what a causal mask gives back.

Chapter 1 of the course. Without position information, softmax attention
treats its keys and values as a set: permuting the queries permutes the
outputs (equivariance), and permuting keys and values together changes
nothing (invariance). A causal mask breaks the symmetry, because query
:math:`m` averages over the :math:`m + 1` tokens before and at it, and that
count is a position:

* with equal scores the weight on the first token is :math:`1/(m+1)`, so a
  first token with a distinctive value hands every later token its position
  (Kazemnejad et al. 2023, arXiv:2305.19466, theorem 1);
* averaging :math:`m + 1` i.i.d. zero-mean values of variance
  :math:`\sigma^2` gives an output whose mean square is
  :math:`\sigma^2/(m+1)`, so the position also shows in the output's norm
  (J. Su, kexue.fm/archives/10347, 2024, who writes it :math:`\sigma^2/n`
  with 1-based :math:`n = m + 1`).

Shapes: ``...`` any leading dimensions (batch, heads), ``T`` sequence length,
``D`` feature dimension. Positions are 0-based.
"""

from __future__ import annotations

import torch

from rope_lessons._checks import check_positive_int, check_positive_number, check_sequence


def permute_sequence(x: torch.Tensor, permutation: torch.Tensor) -> torch.Tensor:
    r"""Reorder the sequence axis: row ``t`` of the result is row ``permutation[t]`` of ``x``.

    Args:
        x: features ``(..., T, D)``.
        permutation: integer tensor ``(T,)`` holding each of ``0 .. T-1`` once.

    Returns:
        Tensor ``(..., T, D)``; in matrix terms :math:`P x` with
        :math:`P_{t, \pi(t)} = 1`.

    Raises:
        TypeError: if ``x`` is not a floating tensor or ``permutation`` not an
            integer tensor.
        ValueError: if ``permutation`` is not a permutation of ``0 .. T-1``.
    """
    x = check_sequence(x, "x")
    if not isinstance(permutation, torch.Tensor):
        raise TypeError(f"permutation must be a torch.Tensor, got {type(permutation).__name__}")
    if (
        permutation.is_floating_point()
        or permutation.is_complex()
        or permutation.dtype == torch.bool
    ):
        raise TypeError(f"permutation must have an integer dtype, got {permutation.dtype}")
    seq_len = x.shape[-2]
    expected = torch.arange(seq_len, device=permutation.device)
    if permutation.shape != (seq_len,) or not torch.equal(permutation.sort().values, expected):
        raise ValueError(
            f"permutation must hold each of 0 .. {seq_len - 1} exactly once, "
            f"got shape {tuple(permutation.shape)}"
        )
    return x[..., permutation.to(x.device), :]


def uniform_causal_attention(values: torch.Tensor) -> torch.Tensor:
    r"""Causal attention whose scores are all equal: :math:`y_m = \frac{1}{m+1}\sum_{n \le m} v_n`.

    This is what :func:`rope_lessons.toy.rotary_attention.attention` computes with
    ``causal=True`` when every query is zero, written as a running mean.

    Args:
        values: ``(..., T, D)``.

    Returns:
        Outputs ``(..., T, D)``; row ``m`` is the mean of value rows ``0 .. m``.
    """
    values = check_sequence(values, "values")
    counts = torch.arange(1, values.shape[-2] + 1, device=values.device, dtype=values.dtype)
    return values.cumsum(dim=-2) / counts[:, None]  # (..., T, D) / (T, 1)


def output_mean_square(weights: torch.Tensor, sigma: float = 1.0) -> torch.Tensor:
    r"""Expected mean square of :math:`y_m = \sum_n a_{mn} v_n` for i.i.d. values.

    If every component of every value is drawn independently with mean 0 and
    variance :math:`\sigma^2`, and the weights do not depend on the values,
    then :math:`\mathbb{E}[y_{m,i}^2] = \sigma^2 \sum_n a_{mn}^2`. Uniform
    causal weights :math:`a_{mn} = 1/(m+1)` give :math:`\sigma^2/(m+1)`.

    Args:
        weights: attention weights ``(..., T, T)``, one row per query.
        sigma: standard deviation of the value components, > 0.

    Returns:
        Tensor ``(..., T)``.
    """
    if not isinstance(weights, torch.Tensor) or not weights.is_floating_point():
        raise TypeError("weights must be a floating torch.Tensor of shape (..., T, T)")
    if weights.ndim < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must have shape (..., T, T), got {tuple(weights.shape)}")
    sigma = check_positive_number(sigma, "sigma")
    return sigma**2 * weights.pow(2).sum(dim=-1)


def mean_square_by_position(outputs: torch.Tensor) -> torch.Tensor:
    """Measured mean square at each position, averaged over every other axis.

    Args:
        outputs: ``(..., T, D)``, e.g. a batch of attention outputs.

    Returns:
        Tensor ``(T,)``: entry ``m`` is the mean of ``outputs[..., m, :] ** 2``.
    """
    outputs = check_sequence(outputs, "outputs")
    return outputs.pow(2).movedim(-2, 0).flatten(1).mean(dim=1)


def sample_uniform_causal_mean_square(
    n_sequences: int,
    seq_len: int,
    dim: int,
    *,
    sigma: float,
    generator: torch.Generator,
) -> torch.Tensor:
    r"""Measure the mean square of uniform causal attention over Gaussian values.

    Draws ``n_sequences`` sequences of ``seq_len`` values in
    :math:`\mathbb{R}^{dim}` with i.i.d. :math:`N(0, \sigma^2)` components
    (float64), applies :func:`uniform_causal_attention` and returns
    :func:`mean_square_by_position`. Each entry averages
    ``n_sequences * dim`` squares, so its relative standard error is
    :math:`\sqrt{2/(n_\text{sequences} \cdot dim)}` around
    :math:`\sigma^2/(m+1)`.

    Returns:
        Tensor ``(seq_len,)``, float64.
    """
    for name, value in (("n_sequences", n_sequences), ("seq_len", seq_len), ("dim", dim)):
        check_positive_int(value, name)
    sigma = check_positive_number(sigma, "sigma")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    values = sigma * torch.randn(
        n_sequences, seq_len, dim, generator=generator, dtype=torch.float64
    )  # (N, T, D)
    return mean_square_by_position(uniform_causal_attention(values))


def position_from_first_token_weight(weight: torch.Tensor) -> torch.Tensor:
    """Read the 0-based position ``m`` off the weight ``1/(m+1)`` on the first token.

    Under uniform causal attention, query ``m`` gives each of its ``m + 1``
    visible tokens the weight ``1/(m+1)``; inverting it recovers ``m``. How far
    this works in finite precision is an exercise of chapter 1: neighbouring
    weights differ by about ``1/m**2``.

    Args:
        weight: weights in ``(0, 1]``, any shape.

    Returns:
        ``round(1/weight) - 1`` as a long tensor of the same shape.
    """
    if not isinstance(weight, torch.Tensor) or not weight.is_floating_point():
        raise TypeError("weight must be a floating torch.Tensor")
    if not ((weight > 0) & (weight <= 1)).all():
        raise ValueError("weight must lie in (0, 1]: it is a softmax weight 1/(m+1)")
    return (1.0 / weight.double()).round().long() - 1
