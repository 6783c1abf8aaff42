"""2D RoPE: the 2D relative property, its matrix, and what flattening loses."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from helpers import random_features
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.rope.general_solution import random_orthogonal
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.rope2d import (
    apply_rope_2d,
    apply_rope_2d_general,
    axial_frequencies,
    grid_positions,
    mixed_frequencies,
    rotation_matrix_2d,
)

dims_2d = st.integers(1, 16).map(lambda quarter: 4 * quarter)
coordinates = st.integers(-10_000, 10_000)
layouts = st.sampled_from(["interleaved", "half"])
seeds = st.integers(0, 2**16)


def at(x: torch.Tensor, column: int, row: int, *, layout: Layout = "interleaved") -> torch.Tensor:
    """Rotate one vector ``(d,)`` as if it stood at (column, row)."""
    return apply_rope_2d(x[None], torch.tensor([column]), torch.tensor([row]), layout=layout)[0]


@given(
    dim=dims_2d,
    x1=coordinates,
    y1=coordinates,
    x2=coordinates,
    y2=coordinates,
    layout=layouts,
    seed=seeds,
)
def test_score_depends_only_on_the_2d_offset(
    dim: int, x1: int, y1: int, x2: int, y2: int, layout: Layout, seed: int
) -> None:
    """<R_(x1,y1) q, R_(x2,y2) k> = <q, R_(x2-x1, y2-y1) k>."""
    q, k = random_features(2, dim, seed=seed)
    lhs = at(q, x1, y1, layout=layout) @ at(k, x2, y2, layout=layout)
    rhs = q @ at(k, x2 - x1, y2 - y1, layout=layout)
    assert math.isclose(lhs, rhs, rel_tol=1e-9, abs_tol=1e-9 * dim)


@given(dim=dims_2d, column=coordinates, row=coordinates, seed=seeds)
def test_matrix_form_equals_the_elementwise_form(
    dim: int, column: int, row: int, seed: int
) -> None:
    x = random_features(dim, seed=seed)
    torch.testing.assert_close(
        rotation_matrix_2d(column, row, dim) @ x, at(x, column, row), rtol=1e-10, atol=1e-10
    )


@given(dim=dims_2d, column=coordinates, row=coordinates, layout=layouts, seed=seeds)
def test_2d_rotation_preserves_the_norm(
    dim: int, column: int, row: int, layout: Layout, seed: int
) -> None:
    x = random_features(dim, seed=seed)
    assert math.isclose(at(x, column, row, layout=layout).norm(), x.norm(), rel_tol=1e-12)


def test_each_half_turns_by_its_own_coordinate() -> None:
    """Golden values: in each half of d = 8 (interleaved), pair 0 turns by the coordinate
    (theta_0 = 1) and pair 1 by a hundredth of it (theta_1 = 10000^(-2/4)); the
    column turns the first half, the row the second."""
    column, row = 3, 7
    out = apply_rope_2d(
        torch.eye(8, dtype=torch.float64), torch.tensor([column]), torch.tensor([row])
    )
    for first, angle in ((0, column), (2, 0.01 * column), (4, row), (6, 0.01 * row)):
        # the unit vector of feature `first` goes to (cos, sin) in its pair, counter-clockwise
        expected = torch.zeros(8, dtype=torch.float64)
        expected[first], expected[first + 1] = math.cos(angle), math.sin(angle)
        torch.testing.assert_close(out[first], expected, rtol=0, atol=1e-12)
    on_first_row = apply_rope_2d(
        random_features(5, 16), torch.arange(5), torch.zeros(5, dtype=torch.long)
    )
    torch.testing.assert_close(on_first_row[:, 8:], random_features(5, 16)[:, 8:], rtol=0, atol=0)


def test_grid_positions_read_the_image_row_by_row() -> None:
    xs, ys = grid_positions(2, 3)
    assert xs.tolist() == [0, 1, 2, 0, 1, 2]
    assert ys.tolist() == [0, 0, 0, 1, 1, 1]


def test_flattened_1d_rope_confuses_offsets_that_2d_rope_separates() -> None:
    """On a W-wide grid, 1D RoPE of the row-major index cannot tell the right
    neighbour (offset (1, 0)) from the wrap to the next row's start (offset
    (1 - W, 1)): both are one token apart. 2D RoPE tells them apart."""
    width = 5
    q, k = random_features(2, 16)
    xs, ys = grid_positions(4, width)
    flat = torch.arange(xs.numel())

    def score_2d(a: int, b: int) -> float:
        return float(at(q, int(xs[a]), int(ys[a])) @ at(k, int(xs[b]), int(ys[b])))

    def score_1d(a: int, b: int) -> float:
        rq = apply_rope(q[None], flat[a : a + 1])[0]
        rk = apply_rope(k[None], flat[b : b + 1])[0]
        return float(rq @ rk)

    right_neighbour, next_row_start = (6, 7), (4, 5)  # offsets (1, 0) and (1 - W, 1)
    assert math.isclose(score_1d(*right_neighbour), score_1d(*next_row_start), rel_tol=1e-12)
    assert abs(score_2d(*right_neighbour) - score_2d(*next_row_start)) > 1e-3


def general_at(
    x: torch.Tensor, column: int, row: int, freqs: tuple[torch.Tensor, torch.Tensor], layout: Layout
) -> torch.Tensor:
    """Rotate one vector ``(d,)`` by the per-pair angles column * a + row * b."""
    return apply_rope_2d_general(
        x[None],
        torch.tensor([column]),
        torch.tensor([row]),
        *freqs,
        layout=layout,
    )[0]


@given(dim=dims_2d, column=coordinates, row=coordinates, seed=seeds)
def test_axial_frequencies_reproduce_apply_rope_2d(
    dim: int, column: int, row: int, seed: int
) -> None:
    x = random_features(dim, seed=seed)
    general = general_at(x, column, row, axial_frequencies(dim), "interleaved")
    torch.testing.assert_close(general, at(x, column, row), rtol=1e-10, atol=1e-10)


def test_mixed_frequencies_golden_values() -> None:
    """d = 8, base 10: magnitudes 1 and 10^-1/2; direction pi/2 swaps x and y."""
    a, b = mixed_frequencies(8, 10.0, direction=math.pi / 2)
    small = 10**-0.5
    torch.testing.assert_close(a, torch.tensor([0.0, 0.0, -1.0, -small], dtype=torch.float64))
    torch.testing.assert_close(b, torch.tensor([1.0, small, 0.0, 0.0], dtype=torch.float64))
    a0, b0 = mixed_frequencies(16, 100.0)
    axial_a, axial_b = axial_frequencies(16, 100.0)
    torch.testing.assert_close(a0, axial_a, rtol=0, atol=1e-15)
    torch.testing.assert_close(b0, axial_b, rtol=0, atol=1e-15)


@given(
    dim=dims_2d,
    x1=coordinates,
    y1=coordinates,
    x2=coordinates,
    y2=coordinates,
    layout=layouts,
    direction=st.floats(0.0, 2 * math.pi),
    seed=seeds,
)
def test_mixed_frequencies_give_scores_of_the_offset_alone(
    dim: int, x1: int, y1: int, x2: int, y2: int, layout: Layout, direction: float, seed: int
) -> None:
    q, k = random_features(2, dim, seed=seed)
    freqs = mixed_frequencies(dim, direction=direction)
    lhs = general_at(q, x1, y1, freqs, layout) @ general_at(k, x2, y2, freqs, layout)
    rhs = q @ general_at(k, x2 - x1, y2 - y1, freqs, layout)
    assert math.isclose(lhs, rhs, rel_tol=1e-9, abs_tol=1e-9 * dim)


def test_mixed_frequencies_tell_apart_offsets_on_one_diagonal() -> None:
    """A pair turning with x + y only (a = b) cannot tell (1, 0) from (0, 1); mixed ones can."""
    q, k = random_features(2, 8)
    ones = torch.ones(4, dtype=torch.float64)
    diagonal = (ones, ones)
    mixed = mixed_frequencies(8, direction=0.3)
    for freqs, same in ((diagonal, True), (mixed, False)):
        right = q @ general_at(k, 1, 0, freqs, "interleaved")
        up = q @ general_at(k, 0, 1, freqs, "interleaved")
        assert math.isclose(right, up, rel_tol=1e-12) is same


def test_non_commuting_generators_break_the_2d_requirement() -> None:
    """R(x, y) = A^x B^y with orthogonal A, B that do not commute is not relative."""
    generator = torch.Generator().manual_seed(0)
    a, b = (random_orthogonal(4, generator=generator) for _ in range(2))

    def rotation(column: int, row: int) -> torch.Tensor:
        result: torch.Tensor = torch.linalg.matrix_power(a, column) @ torch.linalg.matrix_power(
            b, row
        )
        return result

    assert not torch.allclose(a @ b, b @ a)
    lhs = rotation(0, 1).T @ rotation(1, 0)  # B^-1 A; would be R(1, -1) = A B^-1 if relative
    assert (lhs - rotation(1, -1)).abs().max() > 0.1


def test_general_rotation_keeps_dtype_and_refuses_bad_frequencies() -> None:
    x = random_features(3, 8, dtype=torch.float32).to(torch.bfloat16)
    freqs = mixed_frequencies(8)
    out = apply_rope_2d_general(x, torch.arange(3), torch.arange(3), *freqs)
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    with pytest.raises(ValueError, match="freqs_x"):
        apply_rope_2d_general(x, torch.arange(3), torch.arange(3), torch.zeros(3), freqs[1])
    with pytest.raises(TypeError, match="freqs_y"):
        apply_rope_2d_general(x, torch.arange(3), torch.arange(3), freqs[0], torch.arange(4))
    with pytest.raises(ValueError, match="finite"):
        nan = torch.full((4,), math.nan)
        apply_rope_2d_general(x, torch.arange(3), torch.arange(3), freqs[0], nan)
    with pytest.raises(ValueError, match="direction"):
        mixed_frequencies(8, direction=math.inf)


X, THREE = torch.zeros(3, 8), torch.arange(3)


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (
            lambda: apply_rope_2d(torch.zeros(3, 6), THREE, THREE),
            ValueError,
            "multiple of 4",
        ),
        (
            lambda: apply_rope_2d(X, torch.arange(3.0), THREE),
            TypeError,
            "integer dtype",
        ),
        (
            lambda: apply_rope_2d(X, THREE, torch.arange(4)),
            ValueError,
            "do not broadcast",
        ),
        (
            # deliberately ill-typed: the runtime check is under test
            lambda: apply_rope_2d(X, THREE, THREE, layout="x"),  # type: ignore[arg-type]
            ValueError,
            "layout",
        ),
        (lambda: rotation_matrix_2d(0, 0, 6), ValueError, "multiple of 4"),
        # deliberately ill-typed: the runtime check is under test
        (lambda: rotation_matrix_2d(0, 0, 8.0), TypeError, "dim must be an int"),  # type: ignore[arg-type]
        (lambda: grid_positions(0, 3), ValueError, "height"),
    ],
)
def test_bad_input_names_the_argument(
    call: Callable[[], object], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        call()
