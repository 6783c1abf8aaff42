r"""Chapter 7's graded exercises: the complex linear recurrence, and VO-RoPE computed as one.

Chapter 7's recurrence is

.. math::
    \xi_m = \gamma_j\, \xi_{m-1} + x_m, \qquad \xi_{-1} = 0,
    \qquad\text{so}\qquad \xi_m = \sum_{n \le m} \gamma_j^{\,m-n} x_n,

one complex decay :math:`\gamma_j` per channel ``j``; VO-RoPE with the weights
:math:`\gamma^{m-n}` is this recurrence on each pair read as a complex number,
with the clockwise decay :math:`\gamma e^{-i\theta_k}`.

* :func:`check_linear_recurrence` grades ``fn(x, decay)``, the states for
  complex inputs and decays, to be written without a loop over the steps (an
  associative scan, a ``T x T`` matrix of powers, an FFT convolution). It
  compares them with :func:`~rope_lessons.chapters.recurrence.linear_recurrence`,
  the step-by-step loop, on one step, the LRU ring of decays with a negative
  real decay and one of modulus 1, VO-RoPE's decays, and complex64 at lengths
  64 and 512.
* :func:`check_vo_rope_recurrence` grades ``fn(v, gamma)``, VO-RoPE's outputs
  with the weights :math:`\gamma^{m-n}` computed as that recurrence, against
  :func:`~rope_lessons.chapters.recurrence.vo_rope_weighted_sum`, the
  package's VO-RoPE rotations around the weights of
  :func:`~rope_lessons.chapters.recurrence.decay_powers`.

When ``fn`` differs, the checker looks for the bug among wrong recurrences
written with the package's own functions: the decay replaced by its modulus
(the rotation dropped), its real part or its conjugate (turning the wrong way);
the state shifted by one step, the input left out of its own state, one decay
too many, a wrong initial state, time reversed, the causal mask missing; for
VO-RoPE also the pairs read in the half layout. Alone, it recognises powers
formed as a quotient :math:`\gamma^m \gamma^{-n}` (a cumulative product divided
out): right until :math:`|\gamma|^{-m}` overflows on the long sequence.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from rope_lessons._checks import LAYOUTS, Layout, check_seed
from rope_lessons._grading import Report, raised, tensor_or_reason, unrecognised, wrong_shape
from rope_lessons.chapters.recurrence import (
    decay_kernel,
    decay_powers,
    linear_recurrence,
    vo_rope_decay,
    vo_rope_weighted_sum,
)
from rope_lessons.chapters.scan import linear_recurrence_scan
from rope_lessons.rope.kernels import read_pairs, write_pairs

__all__ = ["check_linear_recurrence", "check_vo_rope_recurrence"]

_BATCH, _HEADS = 2, 2
# What a right fn may miss by, relative to the largest output of the case: rounding in
# double precision; in single precision, torch's complex powers lose about T float32
# spacings of their angle (about 5e-5 at T = 512), and every bug misses by far more.
_TOLERANCE = {
    torch.complex128: 1e-9,
    torch.float64: 1e-9,
    torch.complex64: 1e-3,
    torch.float32: 1e-3,
}


@dataclass(frozen=True, eq=False)
class _Case:
    """One input of a check and what ``fn`` must return for it."""

    name: str
    args: tuple[torch.Tensor | float, ...]  # what fn gets: fresh copies of the tensors
    like: torch.Tensor  # fn must return a tensor of its shape and dtype
    reference: torch.Tensor  # what fn must return, in double precision
    moduli: torch.Tensor  # (last,): |γ| behind each entry of the output's last dimension

    @property
    def tolerance(self) -> float:
        return _TOLERANCE[self.like.dtype]

    @property
    def scale(self) -> float:
        """The largest output of the reference: errors are relative to it."""
        return float(self.reference.abs().max())


@dataclass(frozen=True, eq=False)
class _Result:
    case: _Case
    output: torch.Tensor  # in double precision
    error: float  # max |output - reference| / max |reference|; inf if not finite

    @property
    def passed(self) -> bool:
        return self.error <= self.case.tolerance


@dataclass(frozen=True, eq=False)
class _Candidate:
    """A wrong implementation: its bugs' messages and what it returns for a case."""

    bugs: tuple[str, ...]
    output: Callable[[_Case], torch.Tensor]


@dataclass(frozen=True)
class _Exercise:
    """What a checker needs besides its cases: what ``fn`` returns, the candidates, and
    the text of the verdicts."""

    returns: str  # what fn must return, for the shape and dtype diagnoses
    candidates: Sequence[_Candidate]
    correct: str  # the diagnosis of a right fn
    advice: str  # what to compare after an unrecognised difference


# --- the wrong recurrences a reader writes -----------------------------------------------

_Map = Callable[[torch.Tensor], torch.Tensor]

# How fn may use the decay in place of γ: the map, and its message in each exercise.
_DECAYS: dict[str, tuple[_Map, str, str]] = {
    "given": (lambda decay: decay, "", ""),
    "modulus": (
        torch.abs,
        "rotation dropped: fn decays by |γ|, a real decay, so the states shrink but never "
        "turn (the angle of a complex decay is what lets a state oscillate); multiply by γ "
        "itself, as a complex number: its powers are |γ|^r e^{i r arg γ}, not |γ|^r",
        "rotation dropped: fn decays every pair by γ alone, a real decay: that is the decayed "
        "sum of the values, with no rotation at all; VO-RoPE's decay of pair k is the complex "
        "γ e^{-iθ_k}, θ_k = 10000^(-2k/D)",
    ),
    "real part": (
        lambda decay: decay.real,
        "imaginary part of the decay dropped: fn decays by Re γ (a complex γ cast to a real "
        "dtype, or .real taken too early); keep γ and the states complex throughout",
        "imaginary part of the decay dropped: fn decays pair k by γ cos θ_k, the real part of "
        "γ e^{-iθ_k} (a complex number cast to a real dtype, or .real taken too early); keep "
        "the decay and the states complex until the pairs are written back",
    ),
    "conjugate": (
        torch.conj,
        "decay conjugated: fn turns the states the wrong way, by γ̄ = |γ| e^{-i arg γ} in place "
        "of γ; check the sign of the angle, and that no .conj() crept in",
        "decay conjugated: fn decays pair k by γ e^{+iθ_k}, counter-clockwise, where VO-RoPE "
        "gives the clockwise γ e^{-iθ_k} (R_{n-m} turns an earlier v_n back, by (n-m)θ_k < 0); "
        "reading the pair with its imaginary part first, v_{2k+1} + i v_{2k}, does the same: "
        "z_k = v_{2k} + i v_{2k+1}",
    ),
}


def _shifted(states: torch.Tensor) -> torch.Tensor:
    """``states`` ``(..., T, n)`` moved one step later: step ``m`` holds ``m - 1``'s, step 0
    zeros."""
    return torch.cat((torch.zeros_like(states[..., :1, :]), states[..., :-1, :]), dim=-2)


def _from_start(decay: torch.Tensor, seq_len: int) -> torch.Tensor:
    r""":math:`\gamma^{m+1}` for ``m = 0 .. T-1``, ``(T, n)``: how a nonzero initial state
    :math:`\xi_{-1}` reaches step ``m``."""
    return decay_kernel(decay, seq_len + 1)[:, 1:].T


def _anticausal(x: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_{n \ge m} \gamma^{n-m} x_n`: the recurrence run from the last step."""
    return linear_recurrence_scan(x.flip(-2), decay).flip(-2)


_Form = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# The structure of the recurrence, (ξ of the right structure, x, decay) -> what fn returns,
# and its message (written with x; the VO-RoPE exercise reads v for x).
_FORMS: dict[str, tuple[_Form, str]] = {
    "right": (lambda xi, x, decay: xi, ""),
    "shifted": (
        lambda xi, x, decay: _shifted(xi),
        "states shifted by one step: fn returns at step m the state ξ_{m-1} (zero at step 0), "
        "the state before x_m was added (an exclusive scan, or the state stored before its "
        "update); step m's state includes x_m: ξ_m = γ ξ_{m-1} + x_m",
    ),
    "input left out": (
        lambda xi, x, decay: xi - x,
        "x_m left out of its own state: fn returns γ ξ_{m-1}, the sum of γ^(m-n) x_n over "
        "n < m only (the diagonal of the T x T matrix zeroed, or the input added after the "
        "state was stored); the sum runs over n <= m, and the distance 0 has the weight 1",
    ),
    "decay too many": (
        lambda xi, x, decay: decay * xi,
        "one decay too many: fn returns γ ξ_m, every input decayed once before it counts "
        "(ξ_m = γ (ξ_{m-1} + x_m), or powers γ^(m-n+1)); the newest input enters with "
        "weight 1: ξ_m = γ ξ_{m-1} + x_m",
    ),
    "starts at x_0": (
        lambda xi, x, decay: xi + _from_start(decay, x.shape[-2]) * x[..., :1, :],
        "wrong initial state: fn starts from ξ_{-1} = x_0, so x_0 counts twice (a loop that "
        "sets the state to x_0, then runs over every step from 0); start from ξ_{-1} = 0, or "
        "from ξ_0 = x_0 and run the steps 1 to T-1",
    ),
    "starts at 1": (
        lambda xi, x, decay: xi + _from_start(decay, x.shape[-2]),
        "wrong initial state: fn starts from ξ_{-1} = 1 (torch.ones where torch.zeros was "
        "meant); the state before the first input is 0",
    ),
    "reversed": (
        lambda xi, x, decay: _anticausal(x, decay),
        "time reversed: fn's state at step m sums the inputs from m to the end, γ^(n-m) x_n "
        "for n >= m, as the T x T matrix of powers transposed (upper triangle) or a scan run "
        "from the last step gives; the recurrence is causal: n <= m, powers γ^(m-n)",
    ),
    "no mask": (
        lambda xi, x, decay: xi + _anticausal(x, decay) - x,
        "causal mask missing: fn's state at step m sums every input, γ^|m-n| x_n for n before "
        "and after m, as the T x T matrix of powers with |m - n| and no mask gives; keep "
        "n <= m only (zero the upper triangle)",
    ),
}

_HALF_PAIRS = (
    "pairs read in the half layout: fn reads pair k as (v_k, v_{k+D/2}), but this VO-RoPE "
    "uses the course's interleaved layout, pair k = (v_{2k}, v_{2k+1}): read z_k = v_{2k} + "
    "i v_{2k+1} (v[..., 0::2] + 1j * v[..., 1::2]) and write the pairs back the same way"
)


def _with_v(message: str) -> str:
    """A form's message for the VO-RoPE exercise, whose inputs are the values v."""
    for old, new in (("x_m", "v_m"), ("x_n", "v_n"), ("x_0", "v_0")):
        message = message.replace(old, new)
    return message


def _recurrence_candidates() -> list[_Candidate]:
    """Every decay map with every form, but the right pair, fewest bugs first."""

    def output(decay_map: _Map, form: _Form) -> Callable[[_Case], torch.Tensor]:
        def run(case: _Case) -> torch.Tensor:
            x, given = (torch.as_tensor(a).to(torch.complex128) for a in case.args)
            decay = decay_map(given).to(torch.complex128)
            return form(linear_recurrence_scan(x, decay), x, decay)

        return run

    candidates = [
        _Candidate(
            tuple(m for m in (_DECAYS[d][1], _FORMS[f][1]) if m),
            output(_DECAYS[d][0], _FORMS[f][0]),
        )
        for d, f in itertools.product(_DECAYS, _FORMS)
        if (d, f) != ("given", "right")
    ]
    return sorted(candidates, key=lambda c: len(c.bugs))


def _vo_rope_candidates() -> list[_Candidate]:
    """Every pair layout with every decay map and form, but the right triple, fewest bugs
    first."""

    def output(layout: Layout, decay_map: _Map, form: _Form) -> Callable[[_Case], torch.Tensor]:
        def run(case: _Case) -> torch.Tensor:
            v, gamma = case.args
            assert isinstance(v, torch.Tensor) and isinstance(gamma, float)
            z = read_pairs(v.to(torch.float64), layout)  # (B, H, T, D/2)
            decay = decay_map(vo_rope_decay(gamma, v.shape[-1])).to(torch.complex128)
            return write_pairs(form(linear_recurrence_scan(z, decay), z, decay), layout)

        return run

    candidates = [
        _Candidate(
            tuple(
                m
                for m in (
                    _HALF_PAIRS if layout == "half" else "",
                    _DECAYS[d][2],
                    _with_v(_FORMS[f][1]),
                )
                if m
            ),
            output(layout, _DECAYS[d][0], _FORMS[f][0]),
        )
        for layout, d, f in itertools.product(LAYOUTS, _DECAYS, _FORMS)
        if (layout, d, f) != ("interleaved", "given", "right")
    ]
    return sorted(candidates, key=lambda c: len(c.bugs))


# --- the checkers --------------------------------------------------------------------------


def check_linear_recurrence(
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, seed: int = 0
) -> Report:
    r"""Check that ``fn`` computes the states of the complex linear recurrence; name the bug.

    ``fn(x, decay)`` gets complex inputs ``x`` of shape ``(B, T, n)`` (batch,
    steps, channels) and complex decays ``decay`` of shape ``(n,)``, one per
    channel, both complex128 or both complex64, and returns the states

    .. math::
        \xi_m = \gamma_j\, \xi_{m-1} + x_m, \qquad \xi_{-1} = 0,
        \qquad\text{that is}\qquad \xi_m = \sum_{n \le m} \gamma_j^{\,m-n} x_n,

    of shape ``(B, T, n)`` and the dtype of ``x``. The exercise asks for a
    form without a loop over the steps; the check sees only whether the
    states are right. The cases, each on fresh copies of seeded random inputs:

    * one step (``T = 1``), complex128;
    * ``T = 12``, complex128, decays on the LRU ring (moduli 0.5 to 0.99, random
      angles) with a negative real decay ``-0.8`` and one of modulus 1;
    * ``T = 16``, complex128, VO-RoPE's decays :math:`0.9\, e^{-i\theta_k}`
      for ``d = 8`` (:func:`~rope_lessons.chapters.recurrence.vo_rope_decay`);
    * ``T = 64``, complex64, the LRU ring;
    * ``T = 512``, complex64, moduli 0.5 to 0.999: long enough for
      :math:`|\gamma|^{-m}` to overflow float32.

    The reference is :func:`~rope_lessons.chapters.recurrence.linear_recurrence`
    in complex128. An error is relative to the largest state of the case; a
    right ``fn`` stays within 1e-9 in complex128 and 1e-3 in complex64 (powers
    formed by torch's complex ``**`` in float32 lose about ``T`` float32
    spacings of their angle; every bug below misses by far more).

    The diagnosis starts with one of these phrases (the messages of two bugs
    that one wrong recurrence has are joined by ``"; "``):

    * ``"correct"``: every case matched;
    * ``"rotation dropped"``: the decay's modulus :math:`|\gamma|` in place of
      :math:`\gamma`;
    * ``"imaginary part of the decay dropped"``: :math:`\mathrm{Re}\,\gamma`;
    * ``"decay conjugated"``: :math:`\bar\gamma`, turning the wrong way;
    * ``"states shifted by one step"``: :math:`\xi_{m-1}` at step ``m``;
    * ``"x_m left out of its own state"``: :math:`\gamma\xi_{m-1}`;
    * ``"one decay too many"``: :math:`\gamma\xi_m`;
    * ``"wrong initial state"``: :math:`\xi_{-1} = x_0` or :math:`\xi_{-1} = 1`;
    * ``"time reversed"``: the sum over :math:`n \ge m`;
    * ``"causal mask missing"``: the sum over every ``n``, with
      :math:`\gamma^{|m-n|}`;
    * ``"powers overflow"``: right until :math:`|\gamma|^{-m}` overflows, as
      powers formed as a quotient :math:`\gamma^m \gamma^{-n}` (or a
      cumulative product divided out) do;
    * ``"not written yet"``, ``"fn raised"``, ``"fn did not return a tensor"``,
      ``"wrong output shape"``, ``"wrong output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(x, decay) -> states``.
        seed: seed of the random inputs and decays, >= 0.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is relative to
        the largest state of the case.

    Raises:
        TypeError: if ``fn`` is not callable or ``seed`` is not an int.
        ValueError: if ``seed`` is negative or not below 2**63.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(x, decay) -> states; got {fn!r}")
    exercise = _Exercise(
        returns="complex states (B, T, n) in the dtype of x",
        candidates=_RECURRENCE_CANDIDATES,
        correct=(
            "correct: fn matches linear_recurrence on all 5 cases (T = 1 to 512; complex128 "
            "and complex64; VO-RoPE's decays, the LRU ring, a negative real decay and a decay "
            "of modulus 1)"
        ),
        advice=(
            "Print fn(x, decay) beside linear_recurrence(x, decay) "
            "(rope_lessons.chapters.recurrence) for a short case, step by step"
        ),
    )
    return _grade(fn, _recurrence_cases(check_seed(seed)), exercise)


def check_vo_rope_recurrence(
    fn: Callable[[torch.Tensor, float], torch.Tensor], *, seed: int = 0
) -> Report:
    r"""Check that ``fn`` is VO-RoPE with the weights :math:`\gamma^{m-n}`; name the bug.

    ``fn(v, gamma)`` gets real values ``v`` of shape ``(B, H, T, D)`` (``D``
    even), float64 or float32, and a real decay ``gamma`` (a Python float in
    ``(0, 1]``), and returns VO-RoPE's outputs with the causal weights
    :math:`a_{mn} = \gamma^{m-n}` for ``n <= m``:

    .. math::
        o_m = R_m^\top \sum_{n \le m} \gamma^{m-n} R_n v_n ,

    of shape ``(B, H, T, D)`` and the dtype of ``v``, computed as chapter 7's
    recurrence: pair ``k`` read as :math:`z_k = v_{2k} + i\, v_{2k+1}` (the
    interleaved layout), decayed by :math:`\gamma e^{-i\theta_k}` with
    :math:`\theta_k = 10000^{-2k/D}`, and written back. The cases, each on
    fresh copies of seeded random values:

    * one step (``T = 1``), ``D = 8``, ``gamma = 0.9``, float64;
    * ``T = 24``, ``D = 8``, ``gamma = 0.9``, float64;
    * ``T = 24``, ``D = 16``, ``gamma = 1`` (no decay: the rotation alone),
      float64;
    * ``T = 48``, ``D = 16``, ``gamma = 0.7``, float32;
    * ``T = 256``, ``D = 8``, ``gamma = 0.5``, float32: long enough for
      :math:`\gamma^{-m}` to overflow float32.

    The reference is :func:`~rope_lessons.chapters.recurrence.vo_rope_weighted_sum`
    around :func:`~rope_lessons.chapters.recurrence.decay_powers`, in float64:
    the rotations of ``attention(..., placement="vo")`` with the weights
    :math:`\gamma^{m-n}`. An error is relative to the largest output of the
    case; a right ``fn`` stays within 1e-9 in float64 and 1e-3 in float32.

    The diagnosis starts with one of these phrases (the messages of the bugs
    that one wrong implementation has are joined by ``"; "``):

    * ``"correct"``: every case matched;
    * ``"decay conjugated"``: :math:`\gamma e^{+i\theta_k}`, counter-clockwise,
      or the pair read with its imaginary part first;
    * ``"rotation dropped"``: the real :math:`\gamma` in place of
      :math:`\gamma e^{-i\theta_k}`;
    * ``"imaginary part of the decay dropped"``: :math:`\gamma \cos\theta_k`;
    * ``"pairs read in the half layout"``: pair ``k`` as ``(v_k, v_{k+D/2})``;
    * ``"states shifted by one step"``, ``"v_m left out of its own state"``,
      ``"one decay too many"``, ``"wrong initial state"``, ``"time
      reversed"``, ``"causal mask missing"``: as in
      :func:`check_linear_recurrence`;
    * ``"powers overflow"``: right until :math:`\gamma^{-m}` overflows;
    * ``"not written yet"``, ``"fn raised"``, ``"fn did not return a tensor"``,
      ``"wrong output shape"``, ``"wrong output dtype"``;
    * ``"unrecognised difference"``: none of the above reproduces ``fn``.

    Args:
        fn: the function to check, ``(v, gamma) -> outputs``.
        seed: seed of the random values, >= 0.

    Returns:
        A :class:`~rope_lessons._grading.Report`; ``max_error`` is relative to
        the largest output of the case.

    Raises:
        TypeError: if ``fn`` is not callable or ``seed`` is not an int.
        ValueError: if ``seed`` is negative or not below 2**63.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(v, gamma) -> outputs; got {fn!r}")
    exercise = _Exercise(
        returns="real outputs (B, H, T, D) in the dtype of v",
        candidates=_VO_ROPE_CANDIDATES,
        correct=(
            "correct: fn matches VO-RoPE with the weights γ^(m-n) (vo_rope_weighted_sum) on "
            "all 5 cases (T = 1 to 256; D = 8, 16; γ = 0.5 to 1; float64 and float32)"
        ),
        advice=(
            "Compare fn(v, gamma) with vo_rope_weighted_sum(v, decay_powers(torch.tensor("
            "gamma), T)) (rope_lessons.chapters.recurrence) for a short case, pair by pair"
        ),
    )
    return _grade(fn, _vo_rope_cases(check_seed(seed)), exercise)


_RECURRENCE_CANDIDATES = _recurrence_candidates()
_VO_ROPE_CANDIDATES = _vo_rope_candidates()


# --- the cases -----------------------------------------------------------------------------


def _recurrence_cases(seed: int) -> list[_Case]:
    generator = torch.Generator().manual_seed(seed)

    def ring(n: int, low: float, high: float) -> torch.Tensor:
        """``n`` decays, moduli uniform in ``[low, high]``, angles uniform in ``[0, 2π)``."""
        moduli = low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)
        angles = 2 * math.pi * torch.rand(n, generator=generator, dtype=torch.float64)
        return torch.polar(moduli, angles)

    special = torch.tensor([-0.8, complex(math.cos(0.7), math.sin(0.7))], dtype=torch.complex128)
    specs = (
        ("T=1, complex128, the LRU ring", 1, torch.complex128, ring(4, 0.5, 0.99)),
        (
            "T=12, complex128, the LRU ring with decays -0.8 and e^{0.7i}",
            12,
            torch.complex128,
            torch.cat((ring(4, 0.5, 0.99), special)),
        ),
        ("T=16, complex128, VO-RoPE's decays 0.9 e^{-iθ_k}, d=8", 16, torch.complex128, None),
        ("T=64, complex64, the LRU ring", 64, torch.complex64, ring(8, 0.5, 0.99)),
        ("T=512, complex64, moduli 0.5 to 0.999", 512, torch.complex64, ring(8, 0.5, 0.999)),
    )
    cases = []
    for name, seq_len, dtype, given in specs:
        decay = (vo_rope_decay(0.9, 8) if given is None else given).to(dtype)
        x = torch.randn(
            _BATCH, seq_len, decay.numel(), dtype=torch.complex128, generator=generator
        ).to(dtype)
        reference = linear_recurrence(x.to(torch.complex128), decay.to(torch.complex128))
        cases.append(
            _Case(
                name=f"{name}, x {tuple(x.shape)}",
                args=(x, decay),
                like=x,
                reference=reference,
                moduli=decay.abs().to(torch.float64),
            )
        )
    return cases


def _vo_rope_cases(seed: int) -> list[_Case]:
    generator = torch.Generator().manual_seed(seed)
    specs = (
        (1, 8, 0.9, torch.float64),
        (24, 8, 0.9, torch.float64),
        (24, 16, 1.0, torch.float64),
        (48, 16, 0.7, torch.float32),
        (256, 8, 0.5, torch.float32),
    )
    cases = []
    for seq_len, dim, gamma, dtype in specs:
        v = torch.randn(_BATCH, _HEADS, seq_len, dim, dtype=torch.float64, generator=generator).to(
            dtype
        )
        weights = decay_powers(torch.tensor(gamma, dtype=torch.float64), seq_len)  # (T, T)
        reference = vo_rope_weighted_sum(v.to(torch.float64), weights)
        name = f"T={seq_len}, D={dim}, gamma={gamma:g}, {str(dtype).removeprefix('torch.')}"
        cases.append(
            _Case(
                name=f"{name}, v {tuple(v.shape)}",
                args=(v, gamma),
                like=v,
                reference=reference,
                moduli=torch.full((dim,), gamma, dtype=torch.float64),
            )
        )
    return cases


# --- grading -------------------------------------------------------------------------------


def _grade(fn: Callable[..., object], cases: list[_Case], exercise: _Exercise) -> Report:
    """Run ``fn`` on every case, compare, and diagnose."""
    names = tuple(case.name for case in cases)
    results: list[_Result] = []
    with torch.no_grad():
        for case in cases:
            args = [a.clone() if isinstance(a, torch.Tensor) else a for a in case.args]
            try:
                out: object = fn(*args)
            except Exception as error:  # the reader's code may raise anything; a stub, too
                return raised(error, "fn", case.name, names)
            checked = _checked_output(out, case, exercise.returns)
            if isinstance(checked, str):
                return Report(False, checked, math.inf, names, (case.name,))
            output = checked.detach().to(case.reference.dtype)
            relative = float((output - case.reference).abs().max()) / case.scale
            results.append(_Result(case, output, relative if math.isfinite(relative) else math.inf))
    failed = tuple(r.case.name for r in results if not r.passed)
    max_error = max(r.error for r in results)
    if failed:
        return Report(False, _diagnose(results, exercise), max_error, names, failed)
    return Report(True, exercise.correct, max_error, names, ())


def _checked_output(out: object, case: _Case, returns: str) -> torch.Tensor | str:
    """``out`` if it can be compared with the reference, else why not."""
    like = case.like
    out = tensor_or_reason(out, "fn", case.name)
    if isinstance(out, str):
        return out
    if out.shape != like.shape:
        fix = f"return {returns}"
        return wrong_shape(out, case.name, inputs="an input", shape=like.shape, fix=fix)
    if out.dtype != like.dtype:
        dropped = (
            " (real: the imaginary part was dropped)"
            if like.is_complex() and not out.is_complex()
            else ""
        )
        return (
            f"wrong output dtype: fn returned {out.dtype}{dropped} for {like.dtype} input "
            f"({case.name}); return {returns}"
        )
    return out


def _diagnose(results: list[_Result], exercise: _Exercise) -> str:
    """Name the bug of an ``fn`` that failed some case."""
    ordered = sorted(results, key=lambda r: r.passed)  # failures first: they rule out most
    for candidate in exercise.candidates:
        if all(_matches(candidate.output(r.case), r) for r in ordered):
            return "; ".join(candidate.bugs)
    overflow = _overflow(results)
    if overflow is not None:
        return overflow
    failed = [r for r in results if not r.passed]
    worst = max(results, key=lambda r: r.error)
    finite = all(bool(torch.isfinite(r.output).all()) for r in results)
    advice = exercise.advice + ("" if finite else "; fn returned inf or nan on some steps")
    return unrecognised(failed[0].case.name, worst.error, advice)


def _matches(candidate: torch.Tensor, result: _Result) -> bool:
    scale = max(result.case.scale, float(candidate.abs().max()))
    difference = float((candidate - result.output).abs().max())
    return difference <= result.case.tolerance * scale  # False for nan


def _overflow_steps(case: _Case) -> torch.Tensor:
    r"""Per entry of the output's last dimension, the first step ``m`` at which
    :math:`|\gamma|^{-m}` exceeds the largest number of the case's real dtype (``inf``
    where :math:`|\gamma| \ge 1`), ``(last,)``."""
    largest = math.log(torch.finfo(case.like.real.dtype).max)
    shrink = -case.moduli.log()  # -log |γ|, > 0 for |γ| < 1
    steps = torch.full_like(shrink, math.inf)
    inside = shrink > 0
    steps[inside] = torch.ceil(largest / shrink[inside])
    return steps


def _overflow(results: list[_Result]) -> str | None:
    r"""The overflow diagnosis, if ``fn`` returns inf or nan somewhere and every wrong output
    lies at a step where :math:`|\gamma|^{-m}` is at least the square root of the dtype's
    largest number, or is inf or nan where :math:`|\gamma|^{-m}` overflows within the
    sequence (a ``T x T`` matrix whose mask multiplies an infinite power makes nan)."""
    worst: tuple[float, int, _Case] | None = None
    for result in results:
        case = result.case
        finite = torch.isfinite(result.output)
        wrong = ((result.output - case.reference).abs() > case.tolerance * case.scale) | ~finite
        if not bool(wrong.any()):
            continue
        limit = _overflow_steps(case)  # (last,)
        seq_len = case.like.shape[-2]
        steps = torch.arange(seq_len, dtype=torch.float64)[:, None]  # (T, 1)
        excused = (steps >= limit / 2) | (~finite & (limit < seq_len))
        if bool((wrong & ~excused).any()) or bool(finite.all()):
            return None
        entry = int(limit.argmin())
        modulus = float(case.moduli[entry])
        if worst is None or modulus < worst[0]:
            worst = (modulus, int(limit[entry]), case)
    if worst is None:
        return None
    modulus, step, case = worst
    real = case.like.real.dtype
    return (
        f"powers overflow: fn is right on the short sequences but returns inf or nan on the "
        f"long one ({case.name}): with |γ| = {modulus:.3g}, |γ|^(-m) exceeds the largest "
        f"{str(real).removeprefix('torch.')} ({torch.finfo(real).max:.2g}) from step "
        f"m = {step} on. Powers formed as a quotient, γ^m · γ^(-n) or a cumulative product "
        "divided out, overflow long before T is large; form each power from the distance "
        "m - n directly (decay_kernel does), or use a scan"
    )
