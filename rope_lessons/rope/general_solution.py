r"""The general solution of :math:`R_m^\top R_n = R_{n-m}` and why block rotations suffice.

Any orthogonal matrix ``O`` gives a solution :math:`R_m = O^m`, and with
:math:`R_0 = I` every solution has this form. A real orthogonal matrix
without real eigenvalues is a block rotation in a suitable orthonormal basis:
:math:`O = U\,B(\varphi)\,U^\top` with ``U`` orthogonal and :math:`B(\varphi)`
block-diagonal with 2x2 rotations by angles :math:`\varphi_j`. Then

.. math:: q^\top O^{n-m} k = (U^\top q)^\top B((n-m)\varphi)\,(U^\top k),

so "rotate by :math:`O^m`" equals block-diagonal RoPE with frequencies
:math:`\varphi_j` applied to :math:`U^\top q` and :math:`U^\top k`; with
:math:`q = W_q x` the basis change is absorbed into :math:`W_q` (and
:math:`W_k`). J. Su, "Transformer upgrade road 6: completeness analysis of
rotary position embedding" (kexue.fm/archives/9403, 2022) makes this argument
with matrix exponentials :math:`\exp(nB)`, ``B`` skew-symmetric.

Shapes: ``d`` the (even) dimension.
"""

from __future__ import annotations

import math

import torch

from rope_lessons._checks import check_even_dim

ORTHOGONALITY_TOLERANCE = 1e-8


def random_orthogonal(
    dim: int,
    *,
    proper: bool = True,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """A random orthogonal matrix, uniform (Haar) over rotations or over reflections.

    Args:
        dim: size ``d`` (even).
        proper: determinant +1 (a rotation) if True, -1 otherwise.
        generator: source of randomness.
        dtype: floating dtype of the result.

    Returns:
        Tensor ``(d, d)`` with ``O.T @ O = I``.
    """
    dim = check_even_dim(dim)
    gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
    q: torch.Tensor
    q, r = torch.linalg.qr(gaussian)
    q = q * torch.sign(torch.diagonal(r))  # (d, d); the sign fix makes it Haar-uniform
    if (torch.linalg.det(q) > 0) != proper:
        q[:, 0] = -q[:, 0]
    return q.to(dtype)


def block_diagonalise(orthogonal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Write ``O = U @ rope.block_rotation(angles) @ U.T`` with ``U`` orthogonal.

    Each complex eigenpair :math:`e^{\pm i\varphi}` of ``O`` spans an invariant
    plane; for the eigenvector :math:`u = a + ib` of :math:`e^{i\varphi}`, ``O``
    turns the orthonormal pair :math:`(\sqrt2 a, -\sqrt2 b)` by :math:`+\varphi`.

    Args:
        orthogonal: float tensor ``(d, d)``, orthogonal, with no real
            eigenvalue (no +1 or -1; true with probability one for
            :func:`random_orthogonal` with ``proper=True``) and distinct
            eigenvalues.

    Returns:
        ``(U, angles)``: ``U`` of shape ``(d, d)`` (float64, orthogonal) and
        ``angles`` of shape ``(d/2,)`` in ``(0, pi)``, largest first (the
        fastest "frequency" first, as in RoPE).
    """
    if not isinstance(orthogonal, torch.Tensor) or orthogonal.ndim != 2:
        raise ValueError("orthogonal must be a square matrix (d, d)")
    dim = check_even_dim(orthogonal.shape[0], "the size of orthogonal")
    if orthogonal.shape != (dim, dim):
        raise ValueError(f"orthogonal must be square, got {tuple(orthogonal.shape)}")
    o = orthogonal.to(torch.float64)
    identity = torch.eye(dim, dtype=torch.float64)
    if (o.T @ o - identity).abs().max() > ORTHOGONALITY_TOLERANCE:
        raise ValueError("orthogonal must satisfy O.T @ O = I")
    eigenvalues, eigenvectors = torch.linalg.eig(o)  # (d,), (d, d) complex
    upper = eigenvalues.imag > ORTHOGONALITY_TOLERANCE
    if int(upper.sum()) != dim // 2:
        raise ValueError("orthogonal must have no real eigenvalue (+1 or -1)")
    angles = eigenvalues[upper].angle()  # (d/2,) in (0, pi)
    vectors = eigenvectors[:, upper]  # (d, d/2) complex, unit norm
    order = torch.argsort(angles, descending=True)
    angles, vectors = angles[order], vectors[:, order]
    basis = torch.stack((vectors.real, -vectors.imag), dim=-1).flatten(-2)  # (d, d)
    basis = basis * math.sqrt(2.0)
    if (basis.T @ basis - identity).abs().max() > 1e-6:
        raise ValueError("orthogonal must have distinct eigenvalues")
    return basis, angles
