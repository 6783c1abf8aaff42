"""check_rope: right implementations pass, and each planted bug is named.

The implementations are written as a reader would write them, in plain torch:
Hugging Face's ``rotate_half`` with concatenated cos/sin tables (half layout,
float32 angles), Meta's complex multiplication (interleaved layout), and one
parametrised function into which the bugs are planted.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import rope_lessons
from rope_lessons._checks import Layout
from rope_lessons._grading import Report
from rope_lessons.rope.check import check_rope
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.toy.layouts import head_permutation

Fn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def inv_freq(dim: int, base: float = 10000.0) -> torch.Tensor:
    """Hugging Face's frequencies, float32 ``(d/2,)``."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_every_two(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def per_batch(angles: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Angles ``(T, d/2)`` as they are, ``(B, T, d/2)`` as ``(B, 1, T, d/2)`` for the heads."""
    return angles[:, None] if positions.ndim == 2 else angles


def reader_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    *,
    freqs: torch.Tensor | None = None,
    angle_dtype: torch.dtype = torch.float32,
    expand: str = "cat",
    rotate: Callable[[torch.Tensor], torch.Tensor] = rotate_half,
    sign: float = 1.0,
) -> torch.Tensor:
    """Hugging Face's form, ``x cos + rotate_half(x) sin``, with the knobs the bugs turn."""
    freqs = inv_freq(x.shape[-1]) if freqs is None else freqs
    angles = positions.to(angle_dtype)[..., None] * freqs.to(angle_dtype)  # (..., T, d/2)
    angles = per_batch(angles.float(), positions)
    if expand == "cat":
        emb = torch.cat((angles, angles), dim=-1)
    else:
        emb = angles.repeat_interleave(2, dim=-1)
    cos, sin = emb.cos().to(x.dtype), (sign * emb.sin()).to(x.dtype)
    return x * cos + rotate(x) * sin


def hf_rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return reader_rope(x, positions)


def meta_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Meta's Llama form: pairs as complex numbers times ``polar(1, m theta)``."""
    dim = x.shape[-1]
    theta = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = per_batch(positions.double()[..., None] * theta, positions)  # (..., T, d/2)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    turned = z * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)


def meta_rope_theta(x: torch.Tensor, positions: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Meta's form with any frequencies ``(d/2,)``."""
    angles = per_batch(positions.double()[..., None] * theta.double(), positions)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    turned = z * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)


def swapped_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    expand: str = "cat",
    rotate: Callable[[torch.Tensor], torch.Tensor] = rotate_half,
) -> torch.Tensor:
    """``x sin + rotate(x) cos``: the tables unpacked in the wrong order."""
    angles = per_batch(positions.float()[..., None] * inv_freq(x.shape[-1]), positions)
    emb = torch.cat((angles, angles), -1) if expand == "cat" else angles.repeat_interleave(2, -1)
    return x * emb.sin().to(x.dtype) + rotate(x) * emb.cos().to(x.dtype)


def exponents_rope(exponents: Callable[[int], torch.Tensor]) -> Fn:
    """``reader_rope`` with frequencies ``10000 ** -exponents(d)``."""
    return lambda x, p: reader_rope(x, p, freqs=10000.0 ** -exponents(x.shape[-1]))


@pytest.mark.parametrize(
    ("fn", "layout", "base"),
    [
        (hf_rope, "half", 10000.0),
        (lambda x, p: reader_rope(x, p, freqs=inv_freq(x.shape[-1], 5e5)), "half", 5e5),
        (
            lambda x, p: reader_rope(x, p, expand="repeat", rotate=rotate_every_two),
            "interleaved",
            1e4,
        ),
        (meta_rope, "interleaved", 10000.0),
        (lambda x, p: meta_rope(x, p, 1e6), "interleaved", 1e6),
        (lambda x, p: apply_rope(x, p, layout="half"), "half", 10000.0),
    ],
    ids=["hf-half", "hf-half-5e5", "hf-interleaved", "meta", "meta-1e6", "apply_rope"],
)
def test_a_right_implementation_passes(fn: Fn, layout: Layout, base: float) -> None:
    report = check_rope(fn, layout, base)
    assert report.ok, report.diagnosis
    assert report.diagnosis.startswith("correct: fn matches apply_rope")
    assert report.failed == () and len(report.cases) == 2 * 3 * 4  # dims, dtypes, positions
    assert report.max_error < 0.01  # relative to max |x|: bfloat16's rounding


def test_the_cases_cover_every_kind_of_positions_dims_and_dtypes() -> None:
    cases = "\n".join(check_rope(hf_rope, "half").cases)
    for part in ("d=8", "d=64", "float64", "float32", "bfloat16", "shape (T,)", "(B, T) = (2, 8)"):
        assert part in cases
    assert "arange(8) + 17" in cases and "8191" in cases


# Each planted bug, the layout it claims, and the phrase its diagnosis starts with.
PLANTED: dict[str, tuple[Fn, Layout, str]] = {
    "layouts-swapped": (meta_rope, "half", "layouts swapped"),
    "wrong-direction": (
        lambda x, p: reader_rope(x, p, sign=-1.0),
        "half",
        "rotation in the wrong direction",
    ),
    "wrong-base": (
        lambda x, p: reader_rope(x, p, freqs=inv_freq(x.shape[-1], 5e5)),
        "half",
        "wrong base: the angles fit base 500000",
    ),
    "exponent-k/d": (
        exponents_rope(lambda d: torch.arange(d // 2) / d),
        "half",
        "wrong exponent: θ_k = base^(-k/d)",
    ),
    "exponent-linspace": (
        exponents_rope(lambda d: torch.linspace(0, 1, d // 2)),
        "half",
        "wrong exponent: θ_k = base^(-2k/(d-2))",
    ),
    "exponent-from-1": (
        exponents_rope(lambda d: torch.arange(2, d + 1, 2) / d),
        "half",
        "wrong exponent: θ_k = base^(-2(k+1)/d)",
    ),
    "other-frequencies": (
        lambda x, p: reader_rope(x, p, freqs=1.01 * inv_freq(x.shape[-1])),
        "half",
        "wrong frequencies: for d = 8 fn turns the pairs by m·(1.01, 0.101",
    ),
    "off-by-one": (
        lambda x, p: reader_rope(x, p + 1),
        "half",
        "positions off by one: fn turns position m by (m + 1)",
    ),
    "off-by-minus-one": (
        lambda x, p: meta_rope(x, p - 1),
        "interleaved",
        "positions off by one: fn turns position m by (m - 1)",
    ),
    "repeat-in-half": (
        lambda x, p: reader_rope(x, p, expand="repeat"),
        "half",
        "cos/sin duplicated in the wrong order: the d/2 angles are expanded to d columns "
        "with repeat_interleave",
    ),
    "cat-in-interleaved": (
        lambda x, p: reader_rope(x, p, rotate=rotate_every_two),
        "interleaved",
        "cos/sin duplicated in the wrong order: the d/2 angles are expanded to d columns "
        "with torch.cat",
    ),
    "ignores-positions": (
        lambda x, p: hf_rope(x, torch.arange(x.shape[-2])),
        "half",
        "ignores the positions passed",
    ),
    "batch-rows": (
        lambda x, p: hf_rope(x, p[0] if p.ndim == 2 else p),
        "half",
        "(B, T) positions mishandled",
    ),
    "float16-angles": (
        lambda x, p: reader_rope(x, p, angle_dtype=torch.float16),
        "half",
        "angles computed in half precision",
    ),
    "angles-in-x-dtype": (
        lambda x, p: reader_rope(x, p, angle_dtype=x.dtype),
        "half",
        "angles computed in half precision",
    ),
    "sin-sign-in-the-second-half": (
        lambda x, p: reader_rope(
            x, p, rotate=lambda y: torch.cat((-y.chunk(2, -1)[1], -y.chunk(2, -1)[0]), -1)
        ),
        "half",
        "sin's sign wrong in one member of each pair: fn turns a pair (x, y) into "
        "(x cos - y sin, y cos - x sin)",
    ),
    "sin-sign-in-the-first-half": (
        lambda x, p: reader_rope(
            x, p, rotate=lambda y: torch.cat((y.chunk(2, -1)[1], y.chunk(2, -1)[0]), -1)
        ),
        "half",
        "sin's sign wrong in one member of each pair: fn turns a pair (x, y) into "
        "(x cos + y sin, y cos + x sin)",
    ),
    "cos-sin-swapped": (swapped_rope, "half", "cos and sin swapped"),
    "cos-sin-swapped-interleaved": (
        lambda x, p: swapped_rope(x, p, expand="repeat", rotate=rotate_every_two),
        "interleaved",
        "cos and sin swapped",
    ),
    "half-of-the-head-only": (
        lambda x, p: torch.cat(
            (hf_rope(x[..., : x.shape[-1] // 2], p), x[..., x.shape[-1] // 2 :]), -1
        ),
        "half",
        "only the leading half of the head turns: fn rotates the first d/2 features, on a "
        "ladder for d/2",
    ),
    "half-of-the-pairs-only": (
        lambda x, p: torch.cat(
            (
                meta_rope_theta(
                    x[..., : x.shape[-1] // 2], p, inv_freq(x.shape[-1])[: x.shape[-1] // 4]
                ),
                x[..., x.shape[-1] // 2 :],
            ),
            -1,
        ),
        "interleaved",
        "only the leading half of the head turns: fn rotates the first d/2 features, with "
        "RoPE's first d/4 frequencies",
    ),
    "positions-wrapped": (
        lambda x, p: hf_rope(x, p % 2048),
        "half",
        "positions wrapped at 2048: fn turns position m by (m mod 2048)",
    ),
    "positions-clamped": (
        lambda x, p: meta_rope(x, p.clamp(max=4095)),
        "interleaved",
        "positions clamped at 4095",
    ),
    "rotated-twice": (lambda x, p: hf_rope(hf_rope(x, p), p), "half", "rotated twice"),
    "ladder-reversed": (
        lambda x, p: reader_rope(x, p, freqs=inv_freq(x.shape[-1]).flip(0)),
        "half",
        "frequency ladder reversed",
    ),
    "frequencies-inverted": (  # in float64: float32 angles of 8191 * 7500 are noise
        lambda x, p: meta_rope_theta(
            x, p, 10000.0 ** (torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
        ),
        "interleaved",
        "frequencies inverted: θ_k = base^(+2k/d)",
    ),
    "integer-exponents": (
        exponents_rope(lambda d: torch.arange(0, d, 2) // d),
        "half",
        "every pair turns at 1 radian per position",
    ),
    "output-scaled": (lambda x, p: 2 * hf_rope(x, p), "half", "output scaled by 2:"),
    "not-rope": (
        lambda x, p: hf_rope(x, p) + 0.1 * x.flip(-1),
        "half",
        "unrecognised difference",
    ),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_a_planted_bug_is_named(bug: str) -> None:
    fn, layout, phrase = PLANTED[bug]
    report = check_rope(fn, layout)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis
    assert report.failed and set(report.failed) <= set(report.cases)
    assert report.max_error > 0.01


def test_the_permutation_missing_when_porting_weights_is_named_with_its_remedy() -> None:
    """Weights from Meta's (interleaved) checkpoint, rotated by Hugging Face's code."""
    report = check_rope(hf_rope, "interleaved")
    assert report.diagnosis.startswith("layouts swapped: fn turns the half layout's")
    assert "permutation is missing" in report.diagnosis
    assert "head_permutation(n_heads, head_dim, to='half')" in report.diagnosis

    def ported(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # The remedy: queries from rows permuted by head_permutation, i.e. features
        # x[..., perm] (one head), rotated by rotate_half, read back in the first order.
        perm = head_permutation(1, x.shape[-1], to="half")
        return hf_rope(x[..., perm], positions)[..., torch.argsort(perm)]

    assert check_rope(ported, "interleaved").ok


def test_a_wrong_output_dtype_alone_lists_the_cases_it_failed() -> None:
    report = check_rope(lambda x, p: hf_rope(x.double(), p), "half")
    assert not report.ok and report.diagnosis.startswith("wrong output dtype")
    assert report.failed and all("float64" not in case for case in report.failed)
    assert len(report.failed) == 16 and "(on 16 of 24 cases)" in report.diagnosis


def test_several_bugs_are_named_together() -> None:
    report = check_rope(lambda x, p: reader_rope(x, p + 1, sign=-1.0), "interleaved")
    bugs = [bug.split(":")[0] for bug in report.diagnosis.split("; ")]
    assert bugs == ["layouts swapped", "rotation in the wrong direction", "positions off by one"]


def test_half_precision_angles_show_as_an_error_growing_with_position() -> None:
    report = check_rope(lambda x, p: reader_rope(x, p, angle_dtype=torch.bfloat16), "half")
    assert "grows with the position" in report.diagnosis
    only_bf16 = check_rope(lambda x, p: reader_rope(x, p, angle_dtype=x.dtype), "half")
    assert "only with bfloat16 x" in only_bf16.diagnosis
    assert all("bfloat16" in case for case in only_bf16.failed)
    in_float32 = check_rope(
        lambda x, p: reader_rope(x, p, angle_dtype=x.dtype), "half", dtypes=(torch.float32,)
    )
    assert in_float32.ok


def test_a_function_that_raises_is_reported_with_the_case() -> None:
    def outer(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        angles = torch.outer(positions.float(), inv_freq(x.shape[-1]))  # 1-D positions only
        emb = torch.cat((angles, angles), dim=-1)
        return x * emb.cos().to(x.dtype) + rotate_half(x) * emb.sin().to(x.dtype)

    report = check_rope(outer, "half")
    assert report.diagnosis.startswith("fn raised RuntimeError")
    assert "(B, T) = (2, 8)" in report.diagnosis and "positions[:, None, :]" in report.diagnosis
    assert report.max_error == float("inf") and len(report.failed) == 1


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (lambda x, p: hf_rope(x, p)[..., :-1], "wrong output shape: fn returned (2, 3, 8, 7)"),
        (lambda x, p: hf_rope(x, p).transpose(1, 2), "wrong output shape"),
        (lambda x, p: hf_rope(x, p).tolist(), "fn did not return a tensor: it returned list"),
        (lambda x, p: hf_rope(x.double(), p), "wrong output dtype: fn returned torch.float64"),
        (lambda x, p: hf_rope(x, p).to(torch.int64), "wrong output dtype"),
    ],
    ids=["cut", "transposed", "list", "float64", "int64"],
)
def test_an_output_of_the_wrong_kind_is_named(fn: Fn, phrase: str) -> None:
    report = check_rope(fn, "half")
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis


def test_the_input_given_to_fn_cannot_corrupt_the_check() -> None:
    def in_place(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x.copy_(hf_rope(x, positions))
        positions.zero_()
        return x

    assert check_rope(in_place, "half").ok


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"fn": "apply_rope"}, TypeError, "fn must be callable"),
        ({"layout": "halves"}, ValueError, "layout must be one of"),
        ({"base": 1.0}, ValueError, "base must be > 1"),
        ({"base": -5.0}, ValueError, "base must be finite and > 0"),
        ({"dims": (8, 7)}, ValueError, "even"),
        ({"dims": (2,)}, ValueError, ">= 4"),
        ({"dims": ()}, TypeError, "non-empty"),
        ({"dtypes": (torch.int32,)}, ValueError, "dtypes must be among"),
        ({"seed": 0.5}, TypeError, "seed must be an int"),
    ],
)
def test_bad_arguments_are_refused(
    arguments: dict[str, object], error: type[Exception], match: str
) -> None:
    call: dict[str, object] = {"fn": hf_rope, "layout": "half"} | arguments
    with pytest.raises(error, match=match):
        check_rope(**call)  # type: ignore[arg-type]


def test_check_rope_is_importable_from_the_top_level() -> None:
    assert rope_lessons.check_rope is check_rope
    assert "check_rope" in rope_lessons.__all__
    assert isinstance(check_rope(hf_rope, "half", dims=(4,), dtypes=(torch.float32,)), Report)
