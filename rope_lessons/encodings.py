r"""Absolute position encodings that are added to token embeddings.

Chapter 2 of the course walks through them in the order of C. Fleetwood,
"You could have designed state of the art positional encoding" (Hugging Face
blog, 2024): the raw integer, the integer divided by the length, binary
digits, and the sinusoids of Vaswani et al., "Attention Is All You Need"
(arXiv:1706.03762, section 3.5).

Every function returns a float32 tensor of shape ``(n_positions, dim)`` whose
row ``p`` is the encoding of position ``p`` (0-based).
"""

from __future__ import annotations

from typing import Literal

import torch

from rope_lessons._checks import (
    check_base,
    check_choice,
    check_even_dim,
    check_positive_int,
)

AbsoluteEncoding = Literal["integer", "normalised_integer", "binary", "sinusoidal"]
ABSOLUTE_ENCODINGS = ("integer", "normalised_integer", "binary", "sinusoidal")


def integer(n_positions: int, dim: int) -> torch.Tensor:
    """Every component of row ``p`` equals ``p``.

    Returns:
        Tensor ``(n_positions, dim)``.
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    dim = check_positive_int(dim, "dim")
    return torch.arange(n_positions, dtype=torch.float32)[:, None].expand(-1, dim).clone()


def normalised_integer(n_positions: int, dim: int) -> torch.Tensor:
    """Row ``p`` is ``p / n_positions`` everywhere: bounded, but tied to the length.

    The same position gets a different code in sequences of different lengths,
    which is the flaw chapter 2 measures.

    Returns:
        Tensor ``(n_positions, dim)``.
    """
    return integer(n_positions, dim) / n_positions


def binary(n_positions: int, dim: int) -> torch.Tensor:
    """Row ``p`` holds the binary digits of ``p``, least significant in column 0.

    Column ``j`` flips every ``2**j`` positions, so the columns run from the
    fastest to the slowest "frequency", like the sinusoidal pairs.

    Raises:
        ValueError: if ``dim`` bits cannot count to ``n_positions - 1``.

    Returns:
        Tensor ``(n_positions, dim)`` of zeros and ones.
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    dim = check_positive_int(dim, "dim")
    if n_positions - 1 >= 2**dim:
        raise ValueError(
            f"dim={dim} bits hold positions up to {2**dim - 1}, "
            f"but n_positions={n_positions} needs {n_positions - 1}"
        )
    positions = torch.arange(n_positions)[:, None]  # (n, 1)
    bits = torch.arange(dim)[None, :]  # (1, dim)
    return ((positions >> bits) & 1).to(torch.float32)


def sinusoidal(n_positions: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    r"""The Vaswani encoding, sine at even and cosine at odd columns.

    :math:`PE(p, 2k) = \sin(p\,\omega_k)`, :math:`PE(p, 2k+1) = \cos(p\,\omega_k)`
    with :math:`\omega_k = \text{base}^{-2k/d}` (the RoPE frequencies). Writing
    all sines first and all cosines after is a permutation of the columns and
    an equivalent encoding.

    Returns:
        Tensor ``(n_positions, dim)``.
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    dim = check_even_dim(dim)
    base = check_base(base)
    k = torch.arange(dim // 2, dtype=torch.float64)
    omega = base ** (-2.0 * k / dim)  # (d/2,)
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * omega  # (n, d/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2).float()


def sinusoidal_shift_matrix(offset: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    r"""The matrix :math:`M_k` with :math:`PE(p + k) = M_k\,PE(p)` for every ``p``.

    For one (sin, cos) pair with :math:`\phi = k\,\omega`,

    .. math::
        \begin{pmatrix}\sin(a+\phi)\\ \cos(a+\phi)\end{pmatrix} =
        \begin{pmatrix}\cos\phi & \sin\phi\\ -\sin\phi & \cos\phi\end{pmatrix}
        \begin{pmatrix}\sin a\\ \cos a\end{pmatrix},

    a rotation by :math:`-\phi`: clockwise, because sine comes first. It does
    not depend on ``p``.

    Returns:
        Tensor ``(dim, dim)``, block-diagonal, float64.
    """
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    dim = check_even_dim(dim)
    base = check_base(base)
    k = torch.arange(dim // 2, dtype=torch.float64)
    phi = offset * base ** (-2.0 * k / dim)
    cos, sin = phi.cos(), phi.sin()
    blocks = torch.stack((torch.stack((cos, sin), -1), torch.stack((-sin, cos), -1)), -2)
    return torch.block_diag(*blocks)


def absolute_encoding(
    name: AbsoluteEncoding, n_positions: int, dim: int, base: float = 10000.0
) -> torch.Tensor:
    """The encoding called ``name``, as a ``(n_positions, dim)`` table."""
    name = check_choice(name, "name", ABSOLUTE_ENCODINGS)  # type: ignore[assignment]
    if name == "sinusoidal":
        return sinusoidal(n_positions, dim, base)
    builders = {"integer": integer, "normalised_integer": normalised_integer, "binary": binary}
    return builders[name](n_positions, dim)
