r"""Absolute position encodings that are added to token embeddings.

Chapter 2 of the course walks through them in the order of C. Fleetwood,
"You could have designed state of the art positional encoding" (Hugging Face
blog, 2024): the raw integer, the integer divided by the length, binary
digits, and the sinusoids of Vaswani et al., "Attention Is All You Need"
(arXiv:1706.03762, section 3.5). Two more serve as controls in the chapter's
experiment: :func:`direction` (the integer along one fixed direction, which
LayerNorm cannot erase) and the sinusoids with positions slowed down
(``stretch`` of :func:`sinusoidal`, the ``"slow_sinusoidal"`` kind), so that
no pair turns back within the evaluated lengths.

Every encoding returns a float32 tensor (by default) of shape
``(n_positions, dim)`` whose row ``p`` is the encoding of position ``p``
(0-based). The measurements of chapter 2 sit beside them:
:func:`signal_to_noise_ratio` (token power over position power),
:func:`changed_components` (how many components change between neighbours),
:func:`sinusoidal_shift_matrix` and :func:`sinusoidal_dot_product` (the
sinusoidal code's shift and inner-product identities), and
:func:`shift_fit_residual` (how far the best affine map from the code of
``p`` to the code of ``p + k`` misses).
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch

from rope_lessons._checks import (
    check_choice,
    check_positive_int,
    check_positive_number,
)
from rope_lessons.rope.ladder import frequencies

AbsoluteEncoding = Literal[
    "integer", "normalised_integer", "direction", "binary", "sinusoidal", "slow_sinusoidal"
]
ABSOLUTE_ENCODINGS: tuple[AbsoluteEncoding, ...] = get_args(AbsoluteEncoding)
SLOW_STRETCH = 21.0
"""Positions are divided by this in the ``"slow_sinusoidal"`` kind: pair 0 then needs
``21 pi > 65`` positions for half a turn, so no pair turns back before position 65."""
DIRECTION_SEED = 0
"""Seed of the fixed random direction of :func:`direction`."""


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


def direction(n_positions: int, dim: int) -> torch.Tensor:
    r"""Row ``p`` is :math:`p\,u` for a fixed direction :math:`u`: monotone, kept by LayerNorm.

    :math:`u` is a Gaussian vector (seed :data:`DIRECTION_SEED`) with its mean
    removed, so that LayerNorm's mean subtraction leaves the code whole, and
    scaled to norm :math:`\sqrt{d}`, so that :math:`\lVert PE(p)\rVert^2 = d p^2`
    exactly as for :func:`integer`. Any linear read-out along :math:`u` grows
    with ``p`` at every length.

    Raises:
        ValueError: for ``dim < 2`` (one centred component is zero).

    Returns:
        Tensor ``(n_positions, dim)``.
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    dim = check_positive_int(dim, "dim")
    if dim < 2:
        raise ValueError(f"dim must be at least 2 for a centred direction, got {dim}")
    u = torch.randn(
        dim, generator=torch.Generator().manual_seed(DIRECTION_SEED), dtype=torch.float64
    )
    u = u - u.mean()
    u = u * math.sqrt(dim) / u.norm()  # (d,): mean 0, squared norm d
    positions = torch.arange(n_positions, dtype=torch.float64)[:, None]  # (n, 1)
    table: torch.Tensor = (positions * u).to(torch.float32)
    return table


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


def sinusoidal(
    n_positions: int,
    dim: int,
    base: float = 10000.0,
    *,
    stretch: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    r"""The Vaswani encoding, sine at even and cosine at odd columns.

    :math:`PE(p, 2k) = \sin(p\,\omega_k)`, :math:`PE(p, 2k+1) = \cos(p\,\omega_k)`
    with :math:`\omega_k = \text{base}^{-2k/d}` (the RoPE frequencies). Writing
    all sines first and all cosines after is a permutation of the columns and
    an equivalent encoding.

    Args:
        n_positions, dim, base: rows, columns (even) and the base.
        stretch: positions are divided by it, :math:`\sin(p\,\omega_k / s)`:
            every pair turns ``stretch`` times more slowly (1: Vaswani's code).
        dtype: a floating dtype for the result; the angles are computed in
            float64 whatever it is.

    Returns:
        Tensor ``(n_positions, dim)``.
    """
    n_positions = check_positive_int(n_positions, "n_positions")
    stretch = check_positive_number(stretch, "stretch")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    omega = frequencies(dim, base) / stretch  # (d/2,), float64
    angles = torch.arange(n_positions, dtype=torch.float64)[:, None] * omega  # (n, d/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2).to(dtype)


def sinusoidal_dot_product(
    offset: int | torch.Tensor, dim: int, base: float = 10000.0
) -> torch.Tensor:
    r""":math:`PE(p) \cdot PE(p + k) = \sum_{j} \cos(k\,\omega_j)`, the same for every ``p``.

    Each (sin, cos) pair contributes
    :math:`\sin a \sin(a + \phi) + \cos a \cos(a + \phi) = \cos\phi` with
    :math:`\phi = k\,\omega_j`, so the position ``p`` drops out.

    Args:
        offset: the offset ``k``, an int or an integer tensor of any shape.
        dim, base: as in :func:`sinusoidal`.

    Returns:
        float64 tensor of the shape of ``offset``; ``dim / 2`` at offset 0.
    """
    if isinstance(offset, bool) or not isinstance(offset, (int, torch.Tensor)):
        raise TypeError(f"offset must be an int or an integer tensor, got {type(offset).__name__}")
    offsets = torch.as_tensor(offset)
    if offsets.is_floating_point() or offsets.is_complex() or offsets.dtype == torch.bool:
        raise TypeError(f"offset must hold integers, got {offsets.dtype}")
    omega = frequencies(dim, base)  # (d/2,), float64
    return (offsets.double()[..., None] * omega).cos().sum(dim=-1)


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
    phi = offset * frequencies(dim, base)  # (d/2,)
    cos, sin = phi.cos(), phi.sin()
    even = 2 * torch.arange(phi.shape[0])  # first row and column of each 2 x 2 block
    matrix = torch.zeros(2 * phi.shape[0], 2 * phi.shape[0], dtype=torch.float64)
    matrix[even, even], matrix[even, even + 1] = cos, sin
    matrix[even + 1, even], matrix[even + 1, even + 1] = -sin, cos
    return matrix


def signal_to_noise_ratio(signal: torch.Tensor, encoding: torch.Tensor) -> torch.Tensor:
    r"""Power of the token signal over the power of each position's code.

    :math:`\text{SNR}(p) = \overline{\lVert x\rVert^2} / \lVert PE(p)\rVert^2`,
    where the bar averages over the rows of ``signal``. For layer-normed
    embeddings (mean 0 and variance 1 over the ``d`` features of each row)
    :math:`\lVert x\rVert^2 \approx d`, so the integer code
    :math:`p\,\mathbf{1}` gives :math:`1/p^2`. A position whose code is zero
    gets ``inf``. Ten times ``log10`` of it is the ratio in decibels.

    Args:
        signal: token embeddings ``(N, d)``, e.g. after layer normalisation.
        encoding: position codes ``(P, d)``.

    Returns:
        Tensor ``(P,)`` in the dtype of ``signal``.
    """
    for name, t in (("signal", signal), ("encoding", encoding)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise TypeError(f"{name} must be a floating torch.Tensor")
        if t.ndim != 2:
            raise ValueError(f"{name} must have shape (rows, dim), got {tuple(t.shape)}")
    if signal.shape[1] != encoding.shape[1]:
        raise ValueError(
            f"signal and encoding must have the same dim, got {signal.shape[1]} "
            f"and {encoding.shape[1]}"
        )
    signal_power = signal.pow(2).sum(dim=1).mean()  # scalar
    noise_power = encoding.to(signal.dtype).pow(2).sum(dim=1)  # (P,)
    return signal_power / noise_power


def changed_components(table: torch.Tensor) -> torch.Tensor:
    """How many components differ between the codes of neighbouring positions.

    For the binary code, going from ``p`` to ``p + 1`` flips the trailing ones
    of ``p`` and the zero above them: ``7 -> 8`` (``0111 -> 1000``) flips four.

    Args:
        table: position codes ``(P, d)``, row ``p`` for position ``p``.

    Returns:
        Long tensor ``(P - 1,)``: entry ``p`` compares rows ``p`` and ``p + 1``.
    """
    if not isinstance(table, torch.Tensor):
        raise TypeError(f"table must be a torch.Tensor, got {type(table).__name__}")
    if table.ndim != 2 or table.shape[0] < 2:
        raise ValueError(f"table must have shape (positions >= 2, dim), got {tuple(table.shape)}")
    return (table[1:] != table[:-1]).sum(dim=1)


def shift_fit_residual(table: torch.Tensor, offset: int = 1) -> torch.Tensor:
    r"""What the best affine map from :math:`PE(p)` to :math:`PE(p + k)` leaves unexplained.

    Fits :math:`A, b` by least squares so that :math:`A\,PE(p) + b \approx PE(p + k)`
    for every row pair of ``table`` (float64), and returns the residuals. All
    zero (to rounding) when a shift is affine, as for the sinusoidal code; a
    linear map without :math:`b` would miss any code whose row 0 is zero.

    Args:
        table: position codes ``(P, d)``, row ``p`` for position ``p``.
        offset: the shift ``k``, ``1 <= k < P``.

    Returns:
        float64 tensor ``(P - k, d)``: row ``p`` is the fit minus :math:`PE(p + k)`.
    """
    if not isinstance(table, torch.Tensor) or not table.is_floating_point():
        raise TypeError("table must be a floating torch.Tensor of shape (positions, dim)")
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise TypeError(f"offset must be an int, got {type(offset).__name__}")
    if table.ndim != 2 or not 1 <= offset < table.shape[0]:
        raise ValueError(
            f"table must have shape (positions, dim) with more than offset={offset} rows, "
            f"got {tuple(table.shape)}"
        )
    rows = table.double()
    inputs = torch.cat((rows[:-offset], torch.ones_like(rows[:-offset, :1])), dim=1)  # (P-k, d+1)
    targets = rows[offset:]  # (P-k, d)
    # gelsd (SVD): also for rank-deficient inputs such as the integer code's equal columns
    solution = torch.linalg.lstsq(inputs, targets, driver="gelsd").solution  # (d+1, d)
    residual: torch.Tensor = inputs @ solution - targets
    return residual


def absolute_encoding(
    name: AbsoluteEncoding, n_positions: int, dim: int, base: float = 10000.0
) -> torch.Tensor:
    """The encoding called ``name``, as a ``(n_positions, dim)`` table."""
    name = check_choice(name, "name", ABSOLUTE_ENCODINGS)
    if name == "sinusoidal":
        return sinusoidal(n_positions, dim, base)
    if name == "slow_sinusoidal":
        return sinusoidal(n_positions, dim, base, stretch=SLOW_STRETCH)
    builders = {
        "integer": integer,
        "normalised_integer": normalised_integer,
        "direction": direction,
        "binary": binary,
    }
    return builders[name](n_positions, dim)
