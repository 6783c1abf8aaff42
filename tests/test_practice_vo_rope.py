"""check_vo_rope: right attentions pass, and each planted bug is named.

The implementations are written as a reader would write them, in plain torch:
one attention with its own rotation (complex multiplication for the
interleaved layout, the two halves for the half layout) and its own softmax,
into which the bugs are planted, and a loop over queries and keys that turns
each value by :math:`R_{n-m}` directly, the chapter's identity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.practice.vo_rope import VoPlacement, check_vo_rope
from rope_lessons.toy.rotary_attention import attention

Fn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def turn(
    x: torch.Tensor,
    positions: torch.Tensor,
    layout: Layout = "interleaved",
    angle_dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Pair k of the vector at position m turned counter-clockwise by m·10000^(-2k/d)."""
    dim = x.shape[-1]
    inv_freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=angle_dtype) / dim)
    angles = positions.to(angle_dtype)[..., None] * inv_freq  # (T, d/2) or (B, T, d/2)
    if positions.ndim == 2:
        angles = angles[:, None]  # (B, 1, T, d/2)
    cos, sin = angles.cos().double(), angles.sin().double()
    if layout == "interleaved":
        z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], dim // 2, 2).contiguous())
        turned = torch.view_as_real(z * torch.complex(cos, sin)).flatten(-2)
    else:
        x1, x2 = x.double().chunk(2, dim=-1)
        turned = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return turned.to(x.dtype)


@dataclass(frozen=True)
class Bugs:
    """What the reader's attention gets wrong: +1 turns by R at the position, -1 by its
    transpose, 0 not at all; the defaults are VO-RoPE on top of RoPE (qkvo)."""

    q: int = 1
    k: int = 1
    v: int = 1
    o: int = -1
    layout: Layout = "interleaved"
    mask: str = "causal"  # "none", "upper"
    scale: str = "sqrt"  # "none", "dim"
    ignore_positions: bool = False
    shift: tuple[str, int] = ("", 0)  # one of "q", "k", "kv", "v", "o", and the step
    first_row_only: bool = False  # (B, T) positions: row 0 for every batch element
    angle_dtype: torch.dtype = torch.float64


VO = Bugs(q=0, k=0)


def reader_attention(bugs: Bugs = Bugs()) -> Fn:
    """The reader's attention with ``bugs`` planted."""

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        if bugs.ignore_positions:
            p = torch.arange(seq)
        if bugs.first_row_only and p.ndim == 2:
            p = p[0]
        which, step = bugs.shift

        def at(slot: str) -> torch.Tensor:
            return p + step if slot in which else p

        def rotated(x: torch.Tensor, sign: int, slot: str) -> torch.Tensor:
            return turn(x, sign * at(slot), bugs.layout, bugs.angle_dtype) if sign else x

        q, k, v = rotated(q, bugs.q, "q"), rotated(k, bugs.k, "k"), rotated(v, bugs.v, "v")
        divide = {"sqrt": math.sqrt(q.shape[-1]), "none": 1.0, "dim": float(q.shape[-1])}
        scores = q @ k.transpose(-1, -2) / divide[bugs.scale]
        future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
        if bugs.mask == "causal":
            scores = scores.masked_fill(future, float("-inf"))
        elif bugs.mask == "upper":
            scores = scores.masked_fill(future.T, float("-inf"))
        out = scores.softmax(-1) @ v
        return rotated(out, bugs.o, "o")

    return fn


def loop_attention(placement: VoPlacement, layout: Layout = "interleaved") -> Fn:
    """o_m = sum_n a_mn R_{n-m} v_n, one query and one key at a time; for qkvo the score is
    <q_m, R_{n-m} k_n> / sqrt(D)."""

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        batch, _, seq, dim = q.shape
        rows = p.expand(batch, seq)  # (B, T)
        out = torch.zeros_like(q, dtype=torch.float64)
        for b in range(batch):
            for m in range(seq):
                distance = rows[b] - rows[b, m]  # n - m, (T,)
                keys = k[b, :, : m + 1]
                if placement == "qkvo":
                    keys = turn(keys, distance[: m + 1], layout)
                scores = (q[b, :, m : m + 1].double() @ keys.double().transpose(-1, -2))[:, 0]
                weights = (scores / math.sqrt(dim)).softmax(-1)  # (H, m + 1)
                values = turn(v[b, :, : m + 1], distance[: m + 1], layout).double()
                out[b, :, m] = (weights[..., None] * values).sum(-2)
        return out.to(q.dtype)

    return fn


@pytest.mark.parametrize(
    ("fn", "placement", "layout"),
    [
        (reader_attention(), "qkvo", "interleaved"),
        (reader_attention(Bugs(layout="half")), "qkvo", "half"),
        (reader_attention(Bugs(angle_dtype=torch.float32)), "qkvo", "interleaved"),
        (reader_attention(VO), "vo", "interleaved"),
        (reader_attention(Bugs(q=0, k=0, layout="half")), "vo", "half"),
        (loop_attention("qkvo"), "qkvo", "interleaved"),
        (loop_attention("vo", "half"), "vo", "half"),
        (
            lambda q, k, v, p: attention(q, k, v, placement="qkvo", positions=p),
            "qkvo",
            "interleaved",
        ),
    ],
    ids=[
        "qkvo",
        "qkvo-half",
        "qkvo-float32-angles",
        "vo",
        "vo-half",
        "loop-qkvo",
        "loop-vo-half",
        "package-attention",
    ],
)
def test_a_right_attention_passes(fn: Fn, placement: VoPlacement, layout: Layout) -> None:
    report = check_vo_rope(fn, placement, layout)
    assert report.ok, report.diagnosis
    assert report.diagnosis.startswith(f"correct: fn matches attention(placement={placement!r})")
    assert "passes the 4 shift tests" in report.diagnosis
    assert report.failed == () and len(report.cases) == 2 * 2 * 5  # dims, dtypes, 4 + shift
    assert report.max_error < 1e-3


def test_every_position_off_by_one_alike_is_no_bug() -> None:
    """The placements are relative: positions m + 1 everywhere give the same output."""
    assert check_vo_rope(reader_attention(Bugs(shift=("qkvo", 1)))).ok
    assert check_vo_rope(reader_attention(Bugs(q=0, k=0, shift=("vo", -1))), "vo").ok


def test_the_cases_cover_positions_dims_dtypes_and_the_shift_test() -> None:
    cases = "\n".join(check_vo_rope(reader_attention()).cases)
    for part in ("d=8", "d=32", "float64", "float32", "arange(8) + 1000", "(B, T) = (2, 8)"):
        assert part in cases
    assert cases.count("shift test") == 4


# Each planted bug, the placement it claims (in the interleaved layout), and the phrase its
# diagnosis starts with.
PLANTED: dict[str, tuple[Bugs, VoPlacement, str]] = {
    "qk-missing": (VO, "qkvo", "queries and keys not rotated"),
    "qk-clockwise": (Bugs(q=-1, k=-1), "qkvo", "queries and keys turned clockwise"),
    "q-missing": (Bugs(q=0), "qkvo", "queries not rotated"),
    "q-clockwise": (Bugs(q=-1), "qkvo", "queries turned the wrong way"),
    "k-missing": (Bugs(k=0), "qkvo", "keys not rotated"),
    "k-clockwise": (Bugs(k=-1), "qkvo", "keys turned the wrong way"),
    "qk-added": (Bugs(), "vo", "queries and keys rotated"),
    "q-added": (Bugs(k=0), "vo", "queries rotated"),
    "k-added": (Bugs(q=0), "vo", "keys rotated"),
    "vo-missing": (Bugs(v=0, o=0), "qkvo", "values and output not rotated: fn is plain RoPE"),
    "nothing-turns": (
        Bugs(q=0, k=0, v=0, o=0),
        "vo",
        "values and output not rotated: fn is attention without positions",
    ),
    "vo-reversed": (Bugs(v=-1, o=1), "qkvo", "values and output turned the wrong way round"),
    "vo-reversed-alone": (
        Bugs(q=0, k=0, v=-1, o=1),
        "vo",
        "values and output turned the wrong way round",
    ),
    "v-missing": (Bugs(v=0), "qkvo", "value not rotated"),
    "v-clockwise": (Bugs(v=-1), "qkvo", "value rotated the wrong way"),
    "o-missing": (Bugs(o=0), "qkvo", "output not turned back"),
    "o-missing-vo": (Bugs(q=0, k=0, o=0), "vo", "output not turned back"),
    "o-clockwise": (Bugs(o=1), "qkvo", "output turned the wrong way"),
    "o-clockwise-vo": (Bugs(q=0, k=0, o=1), "vo", "output turned the wrong way"),
    "all-clockwise": (Bugs(q=-1, k=-1, v=-1, o=1), "qkvo", "every rotation turns the wrong way"),
    "layouts": (Bugs(layout="half"), "qkvo", "layouts swapped"),
    "positions-ignored": (Bugs(ignore_positions=True), "qkvo", "ignores the positions passed"),
    "positions-ignored-vo": (
        Bugs(q=0, k=0, ignore_positions=True),
        "vo",
        "ignores the positions passed",
    ),
    "q-shifted": (Bugs(shift=("q", 1)), "qkvo", "one rotation off by one: fn turns the queries"),
    "k-shifted": (
        Bugs(shift=("k", -1)),
        "qkvo",
        "one rotation off by one: fn turns the queries at m + 1 (or, the same scores, the keys "
        "at n - 1)",
    ),
    "kv-shifted": (
        Bugs(shift=("kv", 1)),
        "qkvo",
        "one rotation off by one: fn turns the keys and values at n + 1",
    ),
    "v-shifted": (Bugs(shift=("v", 1)), "qkvo", "one rotation off by one: fn turns the values"),
    "o-shifted": (
        Bugs(q=0, k=0, shift=("o", -1)),
        "vo",
        "one rotation off by one: fn turns the values at n + 1 (or, the same output, the "
        "output turned back at m - 1)",
    ),
    "no-mask": (Bugs(mask="none"), "qkvo", "no causal mask"),
    "mask-upside-down": (Bugs(mask="upper"), "qkvo", "causal mask upside down"),
    "not-scaled": (Bugs(scale="none"), "qkvo", "scores not scaled"),
    "scaled-by-d": (Bugs(scale="dim"), "qkvo", "scores divided by D"),
    "batch-rows": (Bugs(first_row_only=True), "qkvo", "(B, T) positions mishandled"),
    "two-bugs": (Bugs(v=0, mask="none"), "qkvo", "value not rotated: "),
}


@pytest.mark.parametrize("bug", PLANTED)
def test_a_planted_bug_is_named(bug: str) -> None:
    bugs, placement, phrase = PLANTED[bug]
    report = check_vo_rope(reader_attention(bugs), placement, "interleaved")
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis
    assert report.failed and set(report.failed) <= set(report.cases)
    assert report.max_error > 0.01


def test_two_bugs_are_named_together() -> None:
    report = check_vo_rope(reader_attention(Bugs(v=0, mask="none")))
    bugs = [bug.split(":")[0] for bug in report.diagnosis.split("; ")]
    assert bugs == ["value not rotated", "no causal mask"]


@pytest.mark.parametrize(
    ("bugs", "relative"),
    [
        (Bugs(o=0), False),
        (Bugs(v=0), False),
        (Bugs(q=0), False),
        (VO, True),
        (Bugs(q=-1, k=-1, v=-1, o=1), True),
        (Bugs(ignore_positions=True), True),
        (Bugs(mask="none"), True),
    ],
    ids=["o-missing", "v-missing", "q-missing", "vo", "all-clockwise", "ignored", "no-mask"],
)
def test_the_diagnosis_says_what_the_shift_test_found(bugs: Bugs, relative: bool) -> None:
    report = check_vo_rope(reader_attention(bugs))
    shift_failures = [case for case in report.failed if "shift test" in case]
    if relative:
        assert "fn passes the shift test" in report.diagnosis and not shift_failures
    else:
        assert "fn fails the shift test: moving every position by 1000" in report.diagnosis
        assert len(shift_failures) == 4


def test_an_unrecognised_bug_gives_the_failing_case_and_the_error() -> None:
    report = check_vo_rope(lambda q, k, v, p: 1.1 * reader_attention()(q, k, v, p))
    assert report.diagnosis.startswith("unrecognised difference: largest error 0.1, first on d=8")
    assert report.first_failure is not None and report.first_failure.startswith("d=8, float64")
    assert math.isfinite(report.max_error) and 0.05 < report.max_error < 0.2
    assert "largest error: 0.1" in str(report)


def test_a_stub_is_not_written_yet() -> None:
    def stub(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("write it")

    report = check_vo_rope(stub)
    assert report.diagnosis.startswith("not written yet: fn raised NotImplementedError")
    assert len(report.failed) == 1 and math.isinf(report.max_error)


def test_a_function_that_raises_is_reported_with_the_case() -> None:
    def outer_only(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: torch.Tensor
    ) -> torch.Tensor:
        if p.ndim != 1:
            raise ValueError("positions must be 1-D")
        return reader_attention()(q, k, v, p)

    report = check_vo_rope(outer_only)
    assert report.diagnosis.startswith("fn raised ValueError: positions must be 1-D")
    assert "(B, T) = (2, 8)" in report.diagnosis and "positions[:, None, :]" in report.diagnosis


@pytest.mark.parametrize(
    ("fn", "phrase"),
    [
        (lambda q, k, v, p: reader_attention()(q, k, v, p)[..., :-1], "wrong output shape"),
        (lambda q, k, v, p: reader_attention()(q, k, v, p).tolist(), "fn did not return a tensor"),
        (lambda q, k, v, p: reader_attention()(q, k, v, p).to(torch.int64), "wrong output dtype"),
        (
            lambda q, k, v, p: reader_attention()(q.double(), k.double(), v.double(), p),
            "wrong output dtype: fn returned torch.float64 for torch.float32 inputs",
        ),
    ],
    ids=["cut", "list", "int64", "float64"],
)
def test_an_output_of_the_wrong_kind_is_named(fn: Fn, phrase: str) -> None:
    report = check_vo_rope(fn)
    assert not report.ok
    assert report.diagnosis.startswith(phrase), report.diagnosis


def test_a_wrong_output_dtype_alone_lists_the_inputs_it_failed() -> None:
    def double(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return reader_attention()(q.double(), k.double(), v.double(), p)

    report = check_vo_rope(double)
    assert report.diagnosis.endswith("(on 8 of 16 inputs)"), report.diagnosis
    assert len(report.failed) == 8 and all("float32" in case for case in report.failed)


def test_the_inputs_given_to_fn_cannot_corrupt_the_check() -> None:
    def in_place(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, p: torch.Tensor
    ) -> torch.Tensor:
        out = reader_attention()(q, k, v, p)
        for t in (q, k, v, p):
            t.zero_()
        return out

    assert check_vo_rope(in_place).ok


@settings(max_examples=5, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    dim=st.sampled_from([4, 6, 16]),
    placement=st.sampled_from(["qkvo", "vo"]),
    layout=st.sampled_from(["interleaved", "half"]),
)
def test_the_reference_passes_for_any_seed_and_dimension(
    seed: int, dim: int, placement: VoPlacement, layout: Layout
) -> None:
    bugs = Bugs(layout=layout) if placement == "qkvo" else Bugs(q=0, k=0, layout=layout)
    report = check_vo_rope(reader_attention(bugs), placement, layout, dims=(dim,), seed=seed)
    assert report.ok, report.diagnosis


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"fn": "attention"}, TypeError, "fn must be callable"),
        ({"placement": "qk"}, ValueError, "placement must be one of"),
        ({"layout": "halves"}, ValueError, "layout must be one of"),
        ({"base": 1.0}, ValueError, "base must be > 1"),
        ({"dims": (8, 7)}, ValueError, "even"),
        ({"dims": (2,)}, ValueError, ">= 4"),
        ({"dims": ()}, TypeError, "non-empty"),
        ({"dims": (8.0,)}, TypeError, "must be an int"),
        ({"dtypes": (torch.bfloat16,)}, ValueError, "dtypes must be among"),
        ({"seed": 0.5}, TypeError, "seed must be an int"),
    ],
)
def test_bad_arguments_are_refused(
    arguments: dict[str, object], error: type[Exception], match: str
) -> None:
    call: dict[str, object] = {"fn": reader_attention()} | arguments
    with pytest.raises(error, match=match):
        check_vo_rope(**call)  # type: ignore[arg-type]
