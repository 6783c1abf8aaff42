"""Linear recurrences: the two forms agree, VO-RoPE is a complex decay, the models, bad input."""

from __future__ import annotations

import cmath
import dataclasses
import math
from collections.abc import Callable

import pytest
import torch
from helpers import random_features
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons.chapters.recurrence import (
    decay_powers,
    delay_readout,
    linear_recurrence,
    linear_recurrence_parallel,
    retnet_decays,
    retnet_effective_decays,
    vo_rope_decay,
    vo_rope_linear_attention,
    vo_rope_weighted_sum,
)
from rope_lessons.chapters.recurrent_models import (
    MIXER_KINDS,
    ComplexDecayMixer,
    MixerKind,
    RealDecayMixer,
    RecurrentConfig,
    RecurrentModel,
    prediction_lags,
)
from rope_lessons.evidence.runs import Run, train_run
from rope_lessons.rope.forms import rotation_matrix
from rope_lessons.rope.kernels import read_pairs, write_pairs
from rope_lessons.rope.ladder import frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import attention
from rope_lessons.toy.synthetic import CopyAtLag

Recurrence = Callable[[torch.Tensor, complex], torch.Tensor]

seeds = st.integers(0, 2**16)
moduli = st.floats(0.0, 1.0)
angles = st.floats(-math.pi, math.pi)


def random_complex(*shape: int, seed: int) -> torch.Tensor:
    """Standard complex normal entries, complex128."""
    real = random_features(*shape, seed=seed)
    imag = random_features(*shape, seed=seed + 1)
    return torch.complex(real, imag)


def random_decays(n: int, seed: int, max_modulus: float = 1.0) -> torch.Tensor:
    """``n`` complex decays with modulus uniform in [0, max_modulus] and any phase."""
    generator = torch.Generator().manual_seed(seed)
    modulus = torch.rand(n, generator=generator, dtype=torch.float64) * max_modulus
    phase = (torch.rand(n, generator=generator, dtype=torch.float64) * 2 - 1) * math.pi
    return torch.polar(modulus, phase)


def test_recurrence_by_hand() -> None:
    x = torch.tensor([[1.0], [2.0], [3.0]], dtype=torch.float64)  # (T=3, n=1)
    expected = torch.tensor([[1.0], [0.5 * 1 + 2], [0.5 * 2.5 + 3]], dtype=torch.float64)
    for form in (linear_recurrence, linear_recurrence_parallel):
        torch.testing.assert_close(form(x, 0.5), expected)


def test_complex_decay_turns_the_state() -> None:
    """One impulse at t=0 and |decay| = 1: the state is decay^t, a point going round the circle."""
    x = torch.zeros(12, 1, dtype=torch.complex128)
    x[0] = 1
    decay = cmath.exp(2j * math.pi / 3)
    for form in (linear_recurrence, linear_recurrence_parallel):
        states = form(x, decay)[:, 0]
        torch.testing.assert_close(states[3:], states[:-3])  # period 3
        torch.testing.assert_close(states[1], torch.tensor(decay, dtype=torch.complex128))


@given(
    batch=st.integers(1, 3),
    seq_len=st.integers(1, 40),
    channels=st.integers(1, 6),
    seed=seeds,
    max_modulus=moduli,
)
def test_forms_agree_for_vector_decay(
    batch: int, seq_len: int, channels: int, seed: int, max_modulus: float
) -> None:
    x = random_complex(batch, seq_len, channels, seed=seed)
    decay = random_decays(channels, seed, max_modulus)
    torch.testing.assert_close(
        linear_recurrence_parallel(x, decay), linear_recurrence(x, decay), rtol=1e-9, atol=1e-9
    )


@given(seq_len=st.integers(1, 40), seed=seeds, modulus=moduli, angle=angles)
def test_forms_agree_for_scalar_decay(
    seq_len: int, seed: int, modulus: float, angle: float
) -> None:
    x = random_complex(2, 3, seq_len, 4, seed=seed)
    decay = cmath.rect(modulus, angle)
    torch.testing.assert_close(
        linear_recurrence_parallel(x, decay), linear_recurrence(x, decay), rtol=1e-9, atol=1e-9
    )


@given(seq_len=st.integers(1, 40), seed=seeds, decay=st.floats(-1.0, 1.0))
def test_forms_agree_for_real_input_and_decay(seq_len: int, seed: int, decay: float) -> None:
    x = random_features(seq_len, 5, seed=seed)
    expected = linear_recurrence(x, decay)
    assert not expected.is_complex()
    torch.testing.assert_close(linear_recurrence_parallel(x, decay), expected)


def test_forms_agree_in_float32_over_long_sequences() -> None:
    """No overflow: powers come from distances, not from decay^t / decay^u."""
    x = random_complex(2048, 3, seed=0).to(torch.complex64)
    decay = torch.polar(
        torch.tensor([0.5, 0.99, 1.0]), torch.tensor([0.3, -2.0, 1.0])
    )  # 0.5^2047 underflows to 0, as it should
    parallel = linear_recurrence_parallel(x, decay)
    assert torch.isfinite(torch.view_as_real(parallel)).all()
    torch.testing.assert_close(parallel, linear_recurrence(x, decay), rtol=1e-3, atol=1e-3)


def test_zero_decay_is_the_identity() -> None:
    x = random_complex(7, 2, seed=3)
    for form in (linear_recurrence, linear_recurrence_parallel):
        torch.testing.assert_close(form(x, 0.0), x)


def test_decay_powers_by_hand() -> None:
    kernel = decay_powers(torch.tensor(-0.5, dtype=torch.float64), 3)
    expected = torch.tensor([[1.0, 0, 0], [-0.5, 1, 0], [0.25, -0.5, 1]], dtype=torch.float64)
    torch.testing.assert_close(kernel, expected)
    assert decay_powers(torch.zeros(4), 5).shape == (4, 5, 5)


def test_gradients_are_finite_at_zero_decay() -> None:
    decay = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    x = random_features(6, 3, seed=1)
    linear_recurrence_parallel(x, decay).sum().backward()
    assert decay.grad is not None and torch.isfinite(decay.grad).all()


@given(seed=seeds, seq_len=st.integers(1, 24), gamma=st.floats(0.05, 1.0))
def test_vo_rope_with_decay_weights_is_the_complex_recurrence(
    seed: int, seq_len: int, gamma: float
) -> None:
    """o_m = R_m^T sum_n gamma^(m-n) R_n v_n equals s_m = gamma e^{-i theta} s_{m-1} + v_m."""
    v = random_features(2, 1, seq_len, 8, seed=seed)
    weights = decay_powers(torch.tensor(gamma, dtype=torch.float64), seq_len)
    vo_rope = vo_rope_weighted_sum(v, weights)
    decay = vo_rope_decay(gamma, 8)
    recurrent = write_pairs(linear_recurrence(read_pairs(v), decay))
    torch.testing.assert_close(vo_rope, recurrent)


def test_the_sign_of_the_phase_matters() -> None:
    """The conjugate decay gamma e^{+i theta} gives a different output: the sign is not free."""
    v = random_features(1, 1, 16, 8, seed=5)
    weights = decay_powers(torch.tensor(0.9, dtype=torch.float64), 16)
    conjugate = vo_rope_decay(0.9, 8).conj()
    wrong = write_pairs(linear_recurrence(read_pairs(v), conjugate))
    assert (wrong - vo_rope_weighted_sum(v, weights)).abs().max() > 0.1


def test_vo_rope_decay_values() -> None:
    decay = vo_rope_decay(0.5, 4, base=100.0)
    theta = frequencies(4, 100.0)
    torch.testing.assert_close(decay.abs(), torch.full((2,), 0.5, dtype=torch.float64))
    torch.testing.assert_close(decay.angle(), -theta)


@settings(max_examples=15)
@given(seed=seeds)
def test_weighted_sum_matches_the_package_vo_attention(seed: int) -> None:
    """With softmax's own weights, vo_rope_weighted_sum is attention(placement="vo")."""
    q, k, v = (random_features(1, 2, 9, 6, seed=seed + i) for i in range(3))
    out, weights = attention(q, k, v, placement="vo", return_weights=True)
    torch.testing.assert_close(vo_rope_weighted_sum(v, weights), out)


def test_retnet_decays() -> None:
    torch.testing.assert_close(
        retnet_decays(3), torch.tensor([1 - 1 / 32, 1 - 1 / 64, 1 - 1 / 128])
    )


def test_retnet_effective_decays_are_vo_rope_decays_per_head() -> None:
    decays = retnet_effective_decays(3, 8, base=100.0).view(3, 4)
    for head, gamma in enumerate(retnet_decays(3).tolist()):
        torch.testing.assert_close(decays[head], vo_rope_decay(gamma, 8, base=100.0))


@pytest.mark.parametrize("mixer", MIXER_KINDS)
def test_models_give_the_same_logits_in_both_forms(mixer: MixerKind) -> None:
    config = RecurrentConfig(vocab_size=11, mixer=mixer, dim=16, state=8, n_layers=2)
    torch.manual_seed(0)
    parallel = RecurrentModel(config)
    recurrent = RecurrentModel(dataclasses.replace(config, form="recurrent"))
    recurrent.load_state_dict(parallel.state_dict())
    tokens = torch.randint(0, 11, (3, 20))
    logits = parallel(tokens)
    assert logits.shape == (3, 20, 11)
    torch.testing.assert_close(recurrent(tokens), logits, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mixer", MIXER_KINDS)
def test_models_are_causal(mixer: MixerKind) -> None:
    model = RecurrentModel(RecurrentConfig(vocab_size=7, mixer=mixer, dim=16, state=4))
    tokens = torch.randint(0, 7, (2, 12))
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 7
    torch.testing.assert_close(model(changed)[:, :8], model(tokens)[:, :8])


def test_initial_decays_lie_on_the_ring() -> None:
    torch.manual_seed(0)
    config = RecurrentConfig(vocab_size=5, mixer="complex", state=256, r_min=0.8, r_max=0.95)
    mixer = RecurrentModel(config).blocks[0].mixer
    assert isinstance(mixer, ComplexDecayMixer)
    modulus = mixer.decay().abs()
    assert modulus.min() >= 0.8 - 1e-6 and modulus.max() <= 0.95 + 1e-6
    # LRU's normalisation: gamma^2 = 1 - |lambda|^2, so a unit input keeps a unit stationary power
    torch.testing.assert_close(mixer.log_gamma.exp() ** 2, 1 - modulus.detach() ** 2)
    real = RecurrentModel(dataclasses.replace(config, mixer="real")).blocks[0].mixer
    assert isinstance(real, RealDecayMixer)
    assert real.decay().shape == (512,) and not real.decay().is_complex()


def test_delay_readout() -> None:
    """A zero decay is a perfect delay-0 line; a DFT ring of n unit decays is any delay < n."""
    assert delay_readout(torch.zeros(1), 0, 10).error < 1e-12
    assert delay_readout(torch.zeros(1), 3, 10).error > 0.3  # can only answer d = 0
    n = 8
    ring = torch.polar(
        torch.ones(n, dtype=torch.float64), torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    )
    exact = delay_readout(ring, 5, n)
    assert exact.error < 1e-10
    assert exact.weight_norm == pytest.approx(
        math.sqrt(1 / n), rel=1e-6
    )  # c_j = e^{-i 2pi j 5/n}/n
    # real decays near 1: nearly equal exponentials, so a delay needs huge weights or fails
    near_one = torch.linspace(0.9, 0.999, 2 * n, dtype=torch.float64)
    fit = delay_readout(near_one, 5, 40)
    assert fit.error > 0.05 or fit.weight_norm > 1e6


def test_delay_readout_drops_singular_values_below_torchs_cutoff() -> None:
    """The minimum-norm fit drops singular values below eps * max(m, n) of the largest
    (torch.linalg.lstsq's default, the docstring's rule), and the budgeted fit uses the
    same cutoff. Two real decays 1e-15 apart give a 64 x 2 matrix whose singular values
    are about 6e-16 apart in ratio: above 1e-16, below 2.2e-16 * 64 = 1.4e-14. Kept,
    they would cost weights of about 4e14; dropped, the fit stays small."""
    decays = torch.tensor([0.5, 0.5 + 1e-15], dtype=torch.float64)
    powers = decay_powers(decays, 64)[:, :, 0].T  # (64, 2)
    singular = torch.linalg.svdvals(powers)
    ratio = float(singular[-1] / singular[0])
    assert 1e-16 < ratio < torch.finfo(torch.float64).eps * 64
    free = delay_readout(decays, 1, 64)
    assert free.weight_norm < 1.0
    budgeted = delay_readout(decays, 1, 64, budget=1e3)  # the free fit is within budget
    assert budgeted.weight_norm == pytest.approx(free.weight_norm, rel=1e-9)
    assert budgeted.error == pytest.approx(free.error, rel=1e-9)


class ShiftOracle(torch.nn.Module):
    """Predicts the token ``lag`` steps back (position 0 onwards sees token 0 before the start)."""

    def __init__(self, lag: int, vocab: int) -> None:
        super().__init__()
        self.lag, self.vocab = lag, vocab

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        shifted = torch.roll(tokens, self.lag, dims=1)
        return torch.nn.functional.one_hot(shifted, self.vocab).float()


def test_prediction_lags_finds_the_lag() -> None:
    tokens = torch.randint(0, 16, (64, 40))
    agreement = prediction_lags(ShiftOracle(3, 16), tokens, max_lag=6)
    assert agreement.shape == (7,)
    assert agreement[3] == 1.0
    assert agreement[[0, 1, 2, 4, 5, 6]].max() < 0.15  # chance is 1/16


def test_a_recurrent_run_trains_seeded_and_evaluates_each_length() -> None:
    config = RecurrentConfig(vocab_size=4, mixer="complex", dim=8, state=4, mlp_ratio=1)
    run = Run("c", config, CopyAtLag(lag=2, vocab=4), train_len=6, eval_lens=(6, 12), steps=3)
    model, result = train_run(run, seed=1, progress=False)
    _, again = train_run(run, seed=1, progress=False)
    assert isinstance(model, RecurrentModel)
    assert result.label == "c" and result.seed == 1 and len(result.losses) == 3
    assert sorted(result.metrics) == [6, 12]
    assert again.losses == result.losses and again.metrics == result.metrics
    assert run.describe()["model"]["mixer"] == "complex"


def test_bad_input_is_refused() -> None:
    x = random_complex(5, 3, seed=0)
    with pytest.raises(TypeError, match="x"):
        linear_recurrence([[1.0]], 0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="x"):
        linear_recurrence(torch.ones(5, 3, dtype=torch.long), 0.5)
    with pytest.raises(ValueError, match="x"):
        linear_recurrence_parallel(torch.ones(5, dtype=torch.complex64), 0.5)
    with pytest.raises(ValueError, match="decay"):
        linear_recurrence_parallel(x, torch.ones(4))
    with pytest.raises(ValueError, match="decay"):
        linear_recurrence(x, float("nan"))
    with pytest.raises(TypeError, match="decay"):
        linear_recurrence(x, "0.5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decay"):
        linear_recurrence(x, True)
    with pytest.raises(ValueError, match="gamma"):
        vo_rope_decay(1.5, 8)
    with pytest.raises(ValueError, match="weights"):
        vo_rope_weighted_sum(torch.ones(1, 1, 4, 8), torch.ones(3, 3))
    with pytest.raises(ValueError, match="v must"):
        vo_rope_weighted_sum(torch.ones(4, 8), torch.ones(4, 4))
    with pytest.raises(ValueError, match="mixer"):
        RecurrentConfig(vocab_size=5, mixer="lstm")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="r_min"):
        RecurrentConfig(vocab_size=5, r_min=0.99, r_max=0.9)
    with pytest.raises(TypeError, match="tokens"):
        RecurrentModel(RecurrentConfig(vocab_size=5))(torch.ones(2, 3))
    with pytest.raises(ValueError, match="lag"):
        delay_readout(torch.ones(2), 10, 10)
    with pytest.raises(TypeError, match="decays"):
        delay_readout(torch.ones(2, 2), 1, 10)
    with pytest.raises(ValueError, match="max_lag"):
        prediction_lags(ShiftOracle(1, 4), torch.zeros(2, 3, dtype=torch.long), max_lag=3)


# --- issue 18: the code fixes of chapter 7 -------------------------------------------


@pytest.mark.parametrize("form", [linear_recurrence, linear_recurrence_parallel])
def test_a_number_decay_is_used_at_the_input_precision(form: Recurrence) -> None:
    """0.9 as a Python float must not pass through float32 for float64 input."""
    x = torch.zeros(1000, 1, dtype=torch.float64)
    x[0] = 1.0
    states = form(x, 0.9)
    assert states.dtype == torch.float64
    assert float(states[-1, 0]) == pytest.approx(0.9**999, rel=1e-12, abs=0)
    complex_states = form(x.to(torch.complex128), 0.9j)
    assert complex(complex_states[-1, 0]) == pytest.approx((0.9j) ** 999, rel=1e-12, abs=0)


@pytest.mark.parametrize("form", [linear_recurrence, linear_recurrence_parallel])
def test_an_empty_sequence_is_refused_alike_by_both_forms(form: Recurrence) -> None:
    with pytest.raises(ValueError, match="at least one step"):
        form(torch.zeros(2, 0, 3), 0.5)


def test_delay_readout_refuses_non_finite_decays() -> None:
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):
            delay_readout(torch.tensor([0.5, bad]), 1, 8)
        with pytest.raises(ValueError, match="finite"):
            delay_readout(torch.tensor([0.5, complex(bad, 0.0)]), 1, 8)


def test_delay_readout_refuses_decays_outside_the_unit_disc() -> None:
    with pytest.raises(ValueError, match="unit disc"):
        delay_readout(torch.tensor([0.5, 1.5]), 1, 64)
    with pytest.raises(ValueError, match="unit disc"):
        delay_readout(torch.polar(torch.tensor([1.01]), torch.tensor([0.3])), 1, 64)
    assert delay_readout(torch.tensor([1.0, -1.0]), 1, 4).error < 0.5  # the circle itself is fine


# --- linear attention with VO-RoPE: a matrix state -----------------------------------


@settings(max_examples=25)
@given(
    seed=seeds,
    seq_len=st.integers(1, 20),
    gamma=st.floats(0.05, 1.0),
    key_dim=st.integers(1, 5),
    base=st.sampled_from([10000.0, 30.0]),
)
def test_vo_linear_attention_is_the_parallel_vo_attention(
    seed: int, seq_len: int, gamma: float, key_dim: int, base: float
) -> None:
    """S_m q_m is R_m^T sum_n (q_m . k_n) gamma^(m-n) R_n v_n, with the package's rotations."""
    q, k = (random_features(2, 2, seq_len, key_dim, seed=seed + i) for i in range(2))
    v = random_features(2, 2, seq_len, 6, seed=seed + 2)
    weights = (q @ k.transpose(-2, -1)) * decay_powers(
        torch.tensor(gamma, dtype=torch.float64), seq_len
    )  # (B, H, T, T), causal
    parallel = vo_rope_weighted_sum(v, weights, rope=Rope(6, base))
    torch.testing.assert_close(vo_rope_linear_attention(q, k, v, gamma, base), parallel)


def test_vo_linear_attention_state_turns_by_r_minus_one() -> None:
    """The explicit matrix recurrence S_m = gamma R_{-1} S_{m-1} + v_m k_m^T; R_{+1} is wrong."""
    q, k, v = (random_features(1, 1, 12, 8, seed=i) for i in range(3))
    expected = vo_rope_linear_attention(q, k, v, 0.9)
    for position, should_match in ((-1, True), (1, False)):
        turn = rotation_matrix(position, 8)  # (D, D)
        state = torch.zeros(8, 8, dtype=torch.float64)
        outputs = []
        for m in range(12):
            state = 0.9 * turn @ state + torch.outer(v[0, 0, m], k[0, 0, m])
            outputs.append(state @ q[0, 0, m])
        gap = (torch.stack(outputs) - expected[0, 0]).abs().max()
        assert (gap < 1e-10) == should_match


def test_vo_linear_attention_refuses_bad_shapes() -> None:
    q = torch.zeros(1, 1, 4, 3)
    with pytest.raises(ValueError, match="D even"):
        vo_rope_linear_attention(q, q, torch.zeros(1, 1, 4, 5), 0.9)
    with pytest.raises(ValueError, match="D even"):
        vo_rope_linear_attention(q, torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 4), 0.9)
    with pytest.raises(ValueError, match="q must"):
        vo_rope_linear_attention(q[0], q, torch.zeros(1, 1, 4, 4), 0.9)
    with pytest.raises(ValueError, match="gamma"):
        vo_rope_linear_attention(q, q, torch.zeros(1, 1, 4, 4), 1.5)


@pytest.mark.parametrize("odd_one", ["q", "k", "v"])
def test_vo_linear_attention_refuses_mixed_dtypes(odd_one: str) -> None:
    """One dtype for q, k and v: a float32 one among float64 ones is named, not left to
    fail deep inside a matrix product."""
    tensors = {
        "q": torch.zeros(1, 1, 4, 3, dtype=torch.float64),
        "k": torch.zeros(1, 1, 4, 3, dtype=torch.float64),
        "v": torch.zeros(1, 1, 4, 4, dtype=torch.float64),
    }
    tensors[odd_one] = tensors[odd_one].float()
    with pytest.raises(TypeError, match="q, k and v must share one dtype"):
        vo_rope_linear_attention(tensors["q"], tensors["k"], tensors["v"], 0.9)


# --- the delay line at a fixed weight budget ------------------------------------------


def test_delay_readout_baseline_and_response() -> None:
    """c = 0 scores 1/sqrt(horizon); the response is h(d) = Re sum c_j lambda_j^d."""
    decays = random_decays(6, seed=2, max_modulus=0.95)
    trivial = delay_readout(decays, 3, 64, budget=0.0)
    assert trivial.error == pytest.approx(1 / 8) and trivial.weight_norm == 0.0
    assert trivial.response == (0.0,) * 64
    ring = torch.polar(torch.ones(8, dtype=torch.float64), torch.arange(8.0).double() * math.pi / 4)
    exact = delay_readout(ring, 5, 8)
    assert exact.response == pytest.approx([float(d == 5) for d in range(8)], abs=1e-10)


@settings(max_examples=20)
@given(seed=seeds, lag=st.integers(0, 15), budget=st.floats(0.01, 50.0), complex_=st.booleans())
def test_budgeted_readout_is_the_constrained_optimum(
    seed: int, lag: int, budget: float, complex_: bool
) -> None:
    """Within budget, no better than the free fit, no worse than c = 0 or a smaller budget."""
    decays = random_decays(5, seed, max_modulus=0.99)
    if not complex_:
        decays = decays.abs()
    fit = delay_readout(decays, lag, 16, budget=budget)
    free = delay_readout(decays, lag, 16)
    assert fit.weight_norm <= budget * (1 + 1e-9)
    assert fit.error >= free.error - 1e-9  # a constraint cannot help
    assert fit.error <= delay_readout(decays, lag, 16, budget=0.0).error + 1e-12
    if free.weight_norm <= budget:
        assert fit.error == pytest.approx(free.error, abs=1e-9)
    else:
        assert fit.weight_norm == pytest.approx(budget, rel=1e-6)
        bigger = delay_readout(decays, lag, 16, budget=budget * 1.5)
        assert bigger.error <= fit.error + 1e-12  # more budget, no worse


def test_budgeted_readout_by_hand() -> None:
    """One real decay 0 answers only d = 0: c = min(1, budget), error from the rest."""
    for budget, weight in ((0.25, 0.25), (3.0, 1.0)):
        fit = delay_readout(torch.zeros(1, dtype=torch.float64), 0, 4, budget=budget)
        assert fit.weight_norm == pytest.approx(weight)
        assert fit.error == pytest.approx(math.sqrt((1 - weight) ** 2 / 4))
    with pytest.raises(ValueError, match="budget"):
        delay_readout(torch.zeros(1), 0, 4, budget=-1.0)
    with pytest.raises(ValueError, match="budget"):
        delay_readout(torch.zeros(1), 0, 4, budget=float("inf"))


def test_budgeted_readout_matches_a_search_over_the_circle() -> None:
    """Two real decays: the best c with |c| = 0.2 found by brute force over its angle."""
    decays = torch.tensor([0.3, 0.9], dtype=torch.float64)
    assert delay_readout(decays, 3, 16).weight_norm > 0.2  # so the optimum lies on the circle
    fit = delay_readout(decays, 3, 16, budget=0.2)
    powers = decays[None, :] ** torch.arange(16, dtype=torch.float64)[:, None]  # (16, 2)
    angle = torch.linspace(0, 2 * math.pi, 200_001, dtype=torch.float64)
    weights = 0.2 * torch.stack((angle.cos(), angle.sin()))  # (2, A)
    target = torch.zeros(16, 1, dtype=torch.float64)
    target[3] = 1.0
    errors = (powers @ weights - target).square().mean(dim=0).sqrt()
    assert fit.error == pytest.approx(float(errors.min()), abs=1e-9)


def test_retention_state_decays_by_the_real_gamma_and_turns_only_in_the_query_frame() -> None:
    """Retention's state S_t = gamma S_(t-1) + (R_t k_t) v_t^T, read by R_t q_t, has the real decay;
    the complex decay gamma e^(-i theta) sits on the key index of P_t = R_t^T S_t."""
    steps, dim, gamma = 10, 8, 0.9
    q, k, v = (random_features(steps, dim, seed=20 + i) for i in range(3))
    turn = [rotation_matrix(t, dim) for t in range(steps)]  # R_t, (D, D) each
    weights = (
        torch.stack([turn[t] @ q[t] for t in range(steps)])
        @ torch.stack([turn[u] @ k[u] for u in range(steps)]).T
        * decay_powers(torch.tensor(gamma, dtype=torch.float64), steps)
    )  # (T, T), causal
    parallel = weights @ v  # retention's parallel form, (T, D)
    state = torch.zeros(dim, dim, dtype=torch.float64)
    frame = torch.zeros(dim, dim, dtype=torch.float64)
    wrong = torch.zeros(dim, dim, dtype=torch.float64)
    for t in range(steps):
        state = gamma * state + torch.outer(turn[t] @ k[t], v[t])  # the real decay
        frame = gamma * rotation_matrix(-1, dim) @ frame + torch.outer(k[t], v[t])
        wrong = gamma * rotation_matrix(1, dim) @ wrong + torch.outer(k[t], v[t])
        torch.testing.assert_close((turn[t] @ q[t]) @ state, parallel[t])
        torch.testing.assert_close(turn[t].T @ state, frame)  # P_t = R_t^T S_t
        if t > 0:
            assert (turn[t].T @ state - wrong).abs().max() > 1e-3  # R_{+1}: the wrong sign
            assert (state - frame).abs().max() > 1e-3  # S_t itself is not P_t
    # the same P_t as complex channels: key-index pairs of each column, decay gamma e^(-i theta)
    outer = k.unsqueeze(-1) * v.unsqueeze(-2)  # (T, D_k, D_v): k_t v_t^T
    pairs = read_pairs(outer.transpose(-1, -2))  # (T, D_v, D_k/2)
    decay = vo_rope_decay(gamma, dim).repeat(dim)  # (D_v * D_k/2,)
    channels = linear_recurrence(pairs.flatten(-2), decay).unflatten(-1, (dim, dim // 2))
    torch.testing.assert_close(write_pairs(channels)[-1].T, frame)
