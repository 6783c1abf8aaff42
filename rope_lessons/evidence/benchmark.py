"""Time the forms of RoPE at several sequence lengths, in one run, and report ratios.

Used by ``benchmarks/rope_speed.py`` and by the chapter-3 notebook. Absolute
times depend on the machine and on its load, so every form is timed in the
same repeats as the reference form and reported as a ratio to it, with the
spread (min, median, max) over the repeats. A plain copy of the input
(``x.clone()``: read ``x`` once, write a tensor of its size once) is timed
beside the forms: no elementwise rotation can move less memory, so it is the
floor that a memory-bound kernel approaches. The table also divides every
form by the copy and by Hugging Face's half-layout formula in the same
repeat, the two yardsticks of the half layout.

Shapes: ``(B, H, T, d)``: batch, heads, sequence length, head dimension.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch.utils import benchmark as torch_benchmark
from torch.utils.benchmark.utils.timer import timer as synchronised_clock

from rope_lessons._checks import check_positive_int
from rope_lessons.rope.forms import apply_rope_complex, apply_rope_loop, layout_permutation
from rope_lessons.rope.kernels import apply_rope, cos_sin, rotate
from rope_lessons.rope.ladder import frequencies

REFERENCE = "apply_rope: interleaved, cached table"
HALF = "apply_rope: half, cached tables"
HF = "Hugging Face: x cos + rotate_half(x) sin"
COPY = "x.clone(): memory-bound floor"
LOOP = "per-pair Python loop"
HALF_LAYOUT_FORMS = (HALF, HF)


def hf_rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``rotate_half`` as Hugging Face ``transformers`` writes it (Llama): ``(-x2, x1)``.

    ``x = (x1, x2)`` split into its two halves ``(..., d/2)``; the result is
    ``cat(-x2, x1)``, shape ``(..., d)``. With ``x * cos + hf_rotate_half(x) * sin``
    it turns pair ``(x[k], x[k + d/2])`` by the angle whose cosine is ``cos[k]``.
    """
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_cos_sin(
    seq_len: int, dim: int, *, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's half-layout tables: each angle twice, by concatenation.

    ``emb = cat(freqs, freqs)`` with ``freqs[m, k] = m * theta_k`` formed in
    float32, as ``LlamaRotaryEmbedding`` does; not ``repeat_interleave``, which
    would suit the interleaved layout.

    Returns:
        ``(cos, sin)``, float32, each ``(T, d)``.
    """
    theta = frequencies(dim, base, dtype=torch.float32)  # (d/2,)
    freqs = torch.arange(seq_len, dtype=torch.float32)[:, None] * theta  # (T, d/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, d)
    return emb.cos(), emb.sin()


def hf_apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's ``apply_rotary_pos_emb`` for one tensor: ``x * cos + rotate_half(x) * sin``.

    Args:
        x: ``(..., T, d)`` in the half layout.
        cos, sin: ``(T, d)`` from :func:`hf_cos_sin`.
    """
    return x * cos + hf_rotate_half(x) * sin


@dataclass(frozen=True)
class Timing:
    """One form at one length: seconds per call and ratio to the reference, over repeats.

    ``samples`` holds the seconds per call in each repeat, in order.
    ``ratios`` is ``(min, median, max)`` over the repeats of the ratio to the
    reference form: the ratio of a repeat divides the form's time by the
    reference form's time in the same repeat, so that a load change between
    repeats cancels out.
    """

    name: str
    seq_len: int
    samples: tuple[float, ...]
    ratios: tuple[float, float, float]

    @property
    def seconds(self) -> tuple[float, float, float]:
        """Seconds per call, ``(min, median, max)`` over the repeats."""
        return _spread(self.samples)

    def median_ratio(self, other: Timing) -> float:
        """The median over repeats of this form's time divided by ``other``'s in the same repeat."""
        return statistics.median(
            mine / theirs for mine, theirs in zip(self.samples, other.samples, strict=True)
        )


def rope_forms(
    x: torch.Tensor, *, with_loop: bool = False
) -> dict[str, Callable[[], torch.Tensor]]:
    """The forms to compare, each a zero-argument call on the same ``x`` ``(B, H, T, d)``.

    The reference (first) form is :func:`~rope_lessons.rope.kernels.apply_rope` as the
    course's models run it: interleaved layout, cached table, one complex multiplication. The
    half-layout forms (:data:`HALF_LAYOUT_FORMS`) run on ``x`` with its
    dimensions permuted into that layout, so that they compute the same
    rotation. The per-pair loop is included only with ``with_loop``.
    """
    dim = x.shape[-1]
    positions = torch.arange(x.shape[-2], device=x.device)
    x_half = x[..., layout_permutation(dim)].contiguous()
    cos, sin = cos_sin(x.shape[:-1], dim, device=x.device)
    hf_cos, hf_sin = (t.to(x.device) for t in hf_cos_sin(x.shape[-2], dim))
    forms: dict[str, Callable[[], torch.Tensor]] = {
        REFERENCE: lambda: apply_rope(x),
        HALF: lambda: apply_rope(x_half, layout="half"),
        HF: lambda: hf_apply_rotary(x_half, hf_cos, hf_sin),
        "elementwise real form (eq. 34), cached": lambda: rotate(x, cos, sin, "interleaved"),
        "apply_rope: explicit positions": lambda: apply_rope(x, positions),
        "complex form, angles every call": lambda: apply_rope_complex(x),
        COPY: lambda: x.clone(),
    }
    if with_loop:
        forms[LOOP] = lambda: apply_rope_loop(x)
    return forms


def _check_forms_agree(x: torch.Tensor, forms: dict[str, Callable[[], torch.Tensor]]) -> None:
    """Every form (but the copy) must give the reference's rotation of ``x``.

    The tolerance grows with the length: Hugging Face forms its angles
    ``m * theta_k`` in float32, whose rounding is about ``m * 2**-24`` radians.
    """
    atol = 1e-5 + x.shape[-2] * 2.0**-20 * float(x.abs().max())
    reference = apply_rope(x)
    permuted = reference[..., layout_permutation(x.shape[-1])]
    for name, form in forms.items():
        if name == COPY:
            continue
        expected = permuted if name in HALF_LAYOUT_FORMS else reference
        torch.testing.assert_close(form(), expected, rtol=1e-5, atol=atol, msg=name)


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def check_timing_args(repeats: int, min_time: float) -> None:
    """Refuse a number of repeats below 1 and a measuring time that is not positive."""
    check_positive_int(repeats, "repeats")
    if not min_time > 0:
        raise ValueError(f"min_time must be positive, got {min_time}")


def _calls_per_measurement(timer: torch_benchmark.Timer, min_time: float) -> int:
    """How many calls last at least ``min_time`` by ``timer``'s clock (one call timed first)."""
    once = max(timer.timeit(1).median, 1e-7)
    return max(1, round(min_time / once))


def time_in_turn(
    forms: Mapping[str, Callable[[], object]],
    reference: str,
    seq_len: int,
    *,
    repeats: int = 5,
    min_time: float = 0.02,
    clock: Callable[[], float] = synchronised_clock,
) -> list[Timing]:
    """Time zero-argument calls in turn, in the same repeats, and divide each by ``reference``.

    Each form gets a ``torch.utils.benchmark.Timer`` on ``clock`` and
    ``torch.get_num_threads()`` threads, and a number of calls per
    measurement such that one measurement lasts at least ``min_time`` by that
    clock (one call is timed first to choose it). Each repeat then measures
    every form once, one after the other, so that a form's ratio to the
    reference divides two times taken moments apart and a change of load
    between repeats cancels out.

    Args:
        forms: the calls to time, by name; the order of the results.
        reference: the name of the form the ratios divide by.
        seq_len: the length recorded in every :class:`Timing`.
        repeats: measurements per form; the spread is over these.
        min_time: seconds per measurement, at least.
        clock: the timer's clock: by default wall time after a
            synchronisation of the accelerator, if any (torch's default);
            ``time.process_time`` counts the process's CPU time instead.

    Returns:
        One :class:`Timing` per form, in the order of ``forms``; the
        reference's ratios are 1.
    """
    check_timing_args(repeats, min_time)
    if reference not in forms:
        raise ValueError(f"the reference {reference!r} is not among the forms {list(forms)}")
    timers = {
        name: torch_benchmark.Timer(
            stmt="form()",
            globals={"form": form},
            timer=clock,
            num_threads=torch.get_num_threads(),
        )
        for name, form in forms.items()
    }
    number = {name: _calls_per_measurement(timer, min_time) for name, timer in timers.items()}
    seconds: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(repeats):
        for name, timer in timers.items():
            seconds[name].append(timer.timeit(number[name]).median)
    return [
        Timing(
            name,
            seq_len,
            tuple(times),
            _spread([t / r for t, r in zip(times, seconds[reference], strict=True)]),
        )
        for name, times in seconds.items()
    ]


def time_rope_forms(
    seq_lens: Sequence[int] = (128, 1024, 8192),
    *,
    batch: int = 1,
    heads: int = 8,
    dim: int = 64,
    repeats: int = 5,
    min_time: float = 0.02,
    loop_max_len: int = 128,
    device: torch.device | str = "cpu",
    seed: int = 0,
) -> list[Timing]:
    """Check that every form gives the same result, then time each at every length.

    For each length ``T`` the input is ``(batch, heads, T, dim)``, float32.
    :func:`time_in_turn` times the forms: each repeat measures every form once,
    one after the other (enough calls each that a measurement lasts at least
    ``min_time``), in wall time on ``torch.get_num_threads()`` threads.

    Args:
        seq_lens: the lengths ``T`` to time.
        batch, heads, dim: the rest of the input's shape.
        repeats: measurements per form and length; the spread is over these.
        min_time: seconds per measurement, at least.
        loop_max_len: the Python loop is timed only up to this length.
        device: where the input lives.
        seed: seed of the random input.

    Returns:
        One :class:`Timing` per form and length, the reference form first at
        each length (its ratios are 1).
    """
    for name, value in (("batch", batch), ("heads", heads), ("dim", dim)):
        check_positive_int(value, name)
    check_timing_args(repeats, min_time)
    if not seq_lens:
        raise ValueError("seq_lens must name at least one length")
    generator = torch.Generator().manual_seed(seed)
    results = []
    for seq_len in seq_lens:
        check_positive_int(seq_len, "seq_len")
        x = torch.randn(batch, heads, seq_len, dim, generator=generator).to(device)
        forms = rope_forms(x, with_loop=seq_len <= loop_max_len)
        _check_forms_agree(x, forms)
        results += time_in_turn(forms, REFERENCE, seq_len, repeats=repeats, min_time=min_time)
    return results


def format_timings(timings: Sequence[Timing]) -> str:
    """A plain-text table: per length, each form's median time and its ratios.

    Columns: the spread (min / median / max over repeats) of the ratio to the
    reference form; then the median over repeats of the ratio to :data:`COPY`
    and to :data:`HF` in the same repeat ("nan" when that form was not timed).
    """
    lines = [
        f"{'T':>5s}  {'form':42s} {'median':>10s}  {'x reference: min / median / max':>31s}"
        f"  {'x copy':>7s}  {'x HF':>6s}"
    ]
    for seq_len in dict.fromkeys(t.seq_len for t in timings):
        at_length = {t.name: t for t in timings if t.seq_len == seq_len}
        yardsticks = [at_length.get(name) for name in (COPY, HF)]
        for t in at_length.values():
            low, mid, high = t.ratios
            copy, hf = (float("nan") if y is None else t.median_ratio(y) for y in yardsticks)
            lines.append(
                f"{seq_len:5d}  {t.name:42s} {t.seconds[1] * 1e3:7.3f} ms  "
                f"{low:11.2f} / {mid:7.2f} / {high:7.2f}  {copy:7.2f}  {hf:6.2f}"
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class TargetRow:
    """The speed targets at one input: medians over repeats of per-repeat ratios, with their
    spread (min, max), for ``apply_rope`` in each layout against Hugging Face's
    ``x cos + rotate_half(x) sin``, and the interleaved form against a copy."""

    shape: tuple[int, int, int, int]  # (B, H, T, d)
    interleaved_vs_hf: tuple[float, float, float]
    half_vs_hf: tuple[float, float, float]
    interleaved_vs_copy: tuple[float, float, float]


def target_row(timings: Sequence[Timing], shape: tuple[int, int, int, int]) -> TargetRow:
    """:class:`TargetRow` from the timings of one length (those of :func:`time_rope_forms`)."""
    at_length = {t.name: t for t in timings if t.seq_len == shape[2]}
    missing = {REFERENCE, HALF, HF, COPY} - set(at_length)
    if missing:
        raise ValueError(f"the timings at T = {shape[2]} lack {sorted(missing)}")

    def ratios(form: str, yardstick: str) -> tuple[float, float, float]:
        mine, theirs = at_length[form].samples, at_length[yardstick].samples
        return _spread([a / b for a, b in zip(mine, theirs, strict=True)])

    return TargetRow(shape, ratios(REFERENCE, HF), ratios(HALF, HF), ratios(REFERENCE, COPY))


HF_TARGET = 1.05
"""``apply_rope`` in either layout: at most this multiple of Hugging Face's formula."""
COPY_TARGET = 2.0
"""The interleaved layout: at most this multiple of a copy, from ``T >= COPY_TARGET_FROM``."""
COPY_TARGET_FROM = 512


def format_targets(rows: Sequence[TargetRow]) -> str:
    """A plain-text table of the targets: each ratio's median [min, max] over repeats, and
    whether the median meets its target (``-`` where none applies)."""

    def cell(spread: tuple[float, float, float], target: float | None) -> str:
        low, mid, high = spread
        verdict = "-" if target is None else ("yes" if mid <= target else "NO")
        return f"{mid:5.2f} [{low:4.2f}, {high:4.2f}] {verdict:>3s}"

    lines = [
        f"{'(B, H, T, d)':>20s}  {'interleaved / HF':>22s}  {'half / HF':>22s}  "
        f"{'interleaved / copy':>22s}",
        f"{'target':>20s}  {'<= ' + str(HF_TARGET):>22s}  {'<= ' + str(HF_TARGET):>22s}  "
        f"{f'<= {COPY_TARGET:g} from T = {COPY_TARGET_FROM}':>22s}",
    ]
    for row in rows:
        copy_target = COPY_TARGET if row.shape[2] >= COPY_TARGET_FROM else None
        lines.append(
            f"{row.shape!s:>20s}  {cell(row.interleaved_vs_hf, HF_TARGET):>22s}  "
            f"{cell(row.half_vs_hf, HF_TARGET):>22s}  "
            f"{cell(row.interleaved_vs_copy, copy_target):>22s}"
        )
    return "\n".join(lines)
