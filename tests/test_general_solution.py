"""R_m = O^m for orthogonal O, and its block-diagonal form (Su, kexue.fm/archives/9403)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.rope.forms import block_rotation
from rope_lessons.rope.general_solution import block_diagonalise, random_orthogonal
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.ladder import frequencies

dims = st.integers(1, 8).map(lambda half: 2 * half)
positions = st.integers(-40, 40)
seeds = st.integers(0, 2**16)


def power(o: torch.Tensor, n: int) -> torch.Tensor:
    """O^n for any integer n (O^-1 = O^T for an orthogonal O)."""
    result: torch.Tensor = torch.linalg.matrix_power(o if n >= 0 else o.T, abs(n))
    return result


@given(dim=dims, proper=st.booleans(), seed=seeds)
def test_random_orthogonal_is_orthogonal_with_the_asked_determinant(
    dim: int, proper: bool, seed: int
) -> None:
    o = random_orthogonal(dim, proper=proper, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(o.T @ o, torch.eye(dim, dtype=torch.float64))
    assert torch.linalg.det(o).item() == pytest.approx(1.0 if proper else -1.0)


@given(dim=dims, m=positions, n=positions, proper=st.booleans(), seed=seeds)
def test_powers_of_an_orthogonal_matrix_are_relative(
    dim: int, m: int, n: int, proper: bool, seed: int
) -> None:
    """R_m = O^m satisfies R_m^T R_n = R_{n-m}, reflections (det -1) included."""
    o = random_orthogonal(dim, proper=proper, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(power(o, m).T @ power(o, n), power(o, n - m), rtol=1e-9, atol=1e-9)


def test_powers_of_a_non_orthogonal_matrix_are_not_relative() -> None:
    o = 1.1 * random_orthogonal(4, generator=torch.Generator().manual_seed(0))
    assert not torch.allclose(power(o, 3).T @ power(o, 5), power(o, 2))


def test_block_rotation_golden_values() -> None:
    """A quarter turn sends (1, 0) to (0, 1): counter-clockwise; a half turn negates."""
    quarter_then_half = block_rotation(torch.tensor([torch.pi / 2, torch.pi], dtype=torch.float64))
    expected = torch.tensor(
        [[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, -1, 0], [0, 0, 0, -1]], dtype=torch.float64
    )
    torch.testing.assert_close(quarter_then_half, expected, rtol=0, atol=1e-15)


@given(m=positions, dim=dims)
def test_block_rotation_of_rope_angles_is_the_rope_rotation(m: int, dim: int) -> None:
    """The matrix form against apply_rope's complex multiplication (a separate kernel)."""
    x = torch.randn(dim, generator=torch.Generator().manual_seed(m % 1000), dtype=torch.float64)
    expected = apply_rope(x[None], torch.tensor([m]))[0]
    torch.testing.assert_close(block_rotation(m * frequencies(dim)) @ x, expected)


@given(dim=dims, seed=seeds)
def test_block_diagonalise_rebuilds_the_matrix_with_an_orthogonal_basis(
    dim: int, seed: int
) -> None:
    o = random_orthogonal(dim, generator=torch.Generator().manual_seed(seed))
    basis, angles = block_diagonalise(o)
    torch.testing.assert_close(basis.T @ basis, torch.eye(dim, dtype=torch.float64))
    torch.testing.assert_close(basis @ block_rotation(angles) @ basis.T, o)
    assert ((angles > 0) & (angles < torch.pi)).all()
    assert (angles[:-1] >= angles[1:]).all()


@given(dim=dims, r=positions, seed=seeds)
def test_general_solution_is_block_rope_in_another_basis(dim: int, r: int, seed: int) -> None:
    """q^T O^r k = (P^T q)^T B(r phi) (P^T k): the basis P can be absorbed into W_q, W_k."""
    generator = torch.Generator().manual_seed(seed)
    o = random_orthogonal(dim, generator=generator)
    q, k = torch.randn(2, dim, generator=generator, dtype=torch.float64)
    basis, angles = block_diagonalise(o)
    general = q @ power(o, r) @ k
    block = (basis.T @ q) @ block_rotation(r * angles) @ (basis.T @ k)
    torch.testing.assert_close(general, block, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: random_orthogonal(3), ValueError, "dim"),
        (lambda: block_rotation(torch.zeros(2, 2)), ValueError, "angles must be a 1-D"),
        (lambda: block_rotation(torch.zeros(2, dtype=torch.long)), TypeError, "floating"),
        (lambda: block_diagonalise(torch.zeros(4)), ValueError, "square matrix"),
        (lambda: block_diagonalise(torch.zeros(4, 6)), ValueError, "square"),
        (lambda: block_diagonalise(2 * torch.eye(4)), ValueError, "O.T @ O = I"),
        (lambda: block_diagonalise(torch.eye(4)), ValueError, "no real eigenvalue"),
    ],
)
def test_bad_input_names_the_argument(
    call: Callable[[], object], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        call()
