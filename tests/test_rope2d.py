"""2D RoPE: the 2D relative property, its matrix, and what flattening loses."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import random_features
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.rope import apply_rope
from rope_lessons.rope2d import apply_rope_2d, grid_positions, rotation_matrix_2d

dims_2d = st.integers(1, 16).map(lambda quarter: 4 * quarter)
coordinates = st.integers(-10_000, 10_000)
layouts = st.sampled_from(["interleaved", "half"])
seeds = st.integers(0, 2**16)


def at(x: torch.Tensor, column: int, row: int, **kwargs: object) -> torch.Tensor:
    """Rotate one vector ``(d,)`` as if it stood at (column, row)."""
    return apply_rope_2d(x[None], torch.tensor([column]), torch.tensor([row]), **kwargs)[0]  # type: ignore[arg-type]


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
    dim: int, x1: int, y1: int, x2: int, y2: int, layout: str, seed: int
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
    dim: int, column: int, row: int, layout: str, seed: int
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
            lambda: apply_rope_2d(X, THREE, THREE, layout="x"),
            ValueError,
            "layout",
        ),
        (lambda: rotation_matrix_2d(0, 0, 6), ValueError, "multiple of 4"),
        (lambda: rotation_matrix_2d(0, 0, 8.0), TypeError, "dim must be an int"),
        (lambda: grid_positions(0, 3), ValueError, "height"),
    ],
)
def test_bad_input_names_the_argument(call, error: type[Exception], word: str) -> None:
    with pytest.raises(error, match=word):
        call()
