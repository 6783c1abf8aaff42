"""Chapter 5's spectrum tools: pair norms, wavelengths, truncated spectra, ablations, heads."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import attention_of, random_features
from hypothesis import assume, given
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.chapters.spectrum import (
    ablate_pair_mask,
    ablate_pairs,
    diagonal_head,
    norm_matched_pairs,
    offset_attention,
    pair_dims,
    pair_energy_shares,
    pair_norms,
    partial_rotary_theta,
    previous_token_head,
    prope_theta,
    spread_vector,
    turn_counts,
)
from rope_lessons.rope.forms import layout_permutation
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.ladder import frequencies, turns, wavelengths
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import attention

dims = st.integers(1, 32).map(lambda half: 2 * half)
layouts = st.sampled_from(["interleaved", "half"])
seeds = st.integers(0, 2**16)


@given(dim=dims, layout=layouts, seed=seeds)
def test_pair_norms_squared_sum_to_the_squared_norm(dim: int, layout: Layout, seed: int) -> None:
    x = random_features(3, 5, dim, seed=seed)
    norms = pair_norms(x, Rope(dim, layout=layout))
    assert norms.shape == (3, 5, dim // 2)
    torch.testing.assert_close((norms**2).sum(-1), (x**2).sum(-1), rtol=1e-12, atol=1e-12)


@given(dim=dims, layout=layouts, seed=seeds, shift=st.integers(-1000, 1000))
def test_rope_keeps_every_pair_norm(dim: int, layout: Layout, seed: int, shift: int) -> None:
    """The pairs of pair_norms are RoPE's pairs: rotation leaves each of their norms alone."""
    x = random_features(6, dim, seed=seed)
    positions = torch.arange(6) * 37 + shift
    rope = Rope(dim, layout=layout)
    rotated = rope.apply(x, positions)
    torch.testing.assert_close(pair_norms(rotated, rope), pair_norms(x, rope))


def test_pair_norms_differ_from_the_wrong_layout() -> None:
    """The check above can fail: in the other layout's pairs, rotation changes the norms."""
    x = random_features(6, 8, seed=1)
    rotated = Rope(8, layout="half").apply(x)
    interleaved = Rope(8)
    assert not torch.allclose(pair_norms(rotated, interleaved), pair_norms(x, interleaved))


@given(dim=dims, seed=seeds)
def test_layouts_are_a_permutation_apart(dim: int, seed: int) -> None:
    x = random_features(4, dim, seed=seed)
    perm = layout_permutation(dim)
    half = Rope(dim, layout="half")
    torch.testing.assert_close(pair_norms(x, Rope(dim)), pair_norms(x[..., perm], half))


def test_pair_dims_by_hand() -> None:
    assert pair_dims(Rope(6)).tolist() == [[0, 1], [2, 3], [4, 5]]
    assert pair_dims(Rope(6, layout="half")).tolist() == [[0, 3], [1, 4], [2, 5]]


def test_pair_norms_by_hand() -> None:
    x = torch.tensor([3.0, 4.0, 1.0, 0.0])
    torch.testing.assert_close(pair_norms(x), torch.tensor([5.0, 1.0]))
    half = pair_norms(x, Rope(4, layout="half"))
    torch.testing.assert_close(half, torch.tensor([math.sqrt(10), 4.0]))


def test_wavelengths_and_turns_by_hand() -> None:
    """d = 4, base 10000: theta = (1, 1/100), wavelengths 2 pi and 200 pi."""
    expected = torch.tensor([2 * math.pi, 200 * math.pi], dtype=torch.float64)
    torch.testing.assert_close(wavelengths(4), expected, rtol=1e-15, atol=0)
    torch.testing.assert_close(turns(4, 100 * math.pi), torch.tensor([50.0, 0.5]).double())
    assert wavelengths(64, base=100.0)[-1] == pytest.approx(2 * math.pi * 100 ** (62 / 64))
    assert turns(4, 0).eq(0).all()  # a context of one token turns nothing


def test_turn_counts_by_hand() -> None:
    """d = 4, base 10000: theta = (1, 1/100). Over 8 tokens pair 0 turns by 7 rad (a full
    turn), pair 1 by 0.07; pair 1 reaches 2 pi = 6.283 only at distance 629 (T = 630)."""
    counts = turn_counts(Rope(4), 8)
    assert (counts.full, counts.partial, counts.stopped, counts.kept) == (1, 1, 0, 2)
    assert counts.slowest_angle == pytest.approx(0.07)
    assert turn_counts(Rope(4), 629).full == 1  # 628 / 100 = 6.28 < 2 pi
    assert turn_counts(Rope(4), 630).full == 2
    assert turn_counts([1.0, 0.0], 8) == turn_counts(torch.tensor([1.0, 0.0]), 8)
    assert turn_counts([1.0, 0.0], 8).stopped == 1
    nope = turn_counts(Rope(8, p=0.0), 64)
    assert (nope.full, nope.partial, nope.stopped, nope.slowest_angle) == (0, 0, 4, 0.0)
    single = turn_counts(Rope(8), 1)  # no distance at all: nothing turns, nothing is stopped
    assert (single.full, single.partial, single.slowest_angle) == (0, 4, 0.0)


def test_turn_counts_of_the_chapter_5_variants() -> None:
    """Head dimension 64, trained at 64 tokens: p-RoPE at base 100 keeps only fully turning
    pairs up to p = 0.5; at base 10000 half the pairs already include partial ones; GPT-NeoX
    partial rotary keeps its slowest pairs, which turn only partly."""
    table = {
        (16, 0): turn_counts(Rope(64, base=100.0, p=0.5), 64),
        (9, 7): turn_counts(Rope(64, base=10000.0, p=0.5), 64),
        (17, 15): turn_counts(Rope(64, base=100.0), 64),
        (8, 0): turn_counts(prope_theta(64, 0.25, 100.0), 64),
        (5, 3): turn_counts(partial_rotary_theta(64, 0.25, 100.0), 64),
    }
    for (full, partial), counts in table.items():
        assert (counts.full, counts.partial) == (full, partial)
        assert counts.stopped == 32 - full - partial


@given(
    dim=dims,
    base=st.floats(2.0, 1e6),
    p=st.floats(0.0, 1.0),
    context=st.integers(1, 5000),
)
def test_turn_counts_agree_with_turns_and_prope(
    dim: int, base: float, p: float, context: int
) -> None:
    """Pairs kept are p-RoPE's floor(p d/2) fastest; of those, the fully turning ones are
    those that turns() says make at least one turn over the largest distance T - 1."""
    counts = turn_counts(Rope(dim, base, p=p), context)
    kept = math.floor(p * dim / 2)
    assert counts.kept == kept and counts.stopped == dim // 2 - kept
    made = (context - 1) * frequencies(dim, base)[:kept] / (2 * math.pi)
    assume(bool(((made - 1).abs() > 1e-9).all()))  # not exactly on a full turn
    if context > 1:
        assert counts.full == int((turns(dim, context - 1, base)[:kept] >= 1).sum())
    assert counts.full == int((made >= 1).sum())


@given(theta=st.lists(st.floats(0.0, 10.0), min_size=1, max_size=16), context=st.integers(1, 300))
def test_turn_counts_grow_with_the_context(theta: list[float], context: int) -> None:
    """A longer context turns every pair further: fully turning pairs never become fewer,
    and the stopped ones stay stopped."""
    shorter, longer = turn_counts(theta, context), turn_counts(theta, 2 * context)
    assert longer.full >= shorter.full and longer.stopped == shorter.stopped
    assert shorter.full + shorter.partial + shorter.stopped == len(theta)
    assert longer.slowest_angle >= shorter.slowest_angle


def test_prope_keeps_the_highest_frequencies() -> None:
    theta = prope_theta(16, 0.25, base=100.0)
    assert theta[:2].tolist() == frequencies(16, 100.0)[:2].tolist()
    assert theta[2:].eq(0).all()


def test_partial_rotary_by_hand() -> None:
    """d = 8, fraction 1/2: four rotated dims, ladder base^(-2i/4) = (1, 1/10) for base 100."""
    theta = partial_rotary_theta(8, 0.5, base=100.0)
    torch.testing.assert_close(theta, torch.tensor([1.0, 0.1, 0.0, 0.0]).double())
    assert partial_rotary_theta(8, 1.0).tolist() == frequencies(8).tolist()
    assert partial_rotary_theta(8, 0.0).eq(0).all()


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75, 1.0])
def test_partial_rotary_matches_transformers_gpt_neox(fraction: float) -> None:
    """Hugging Face's GPT-NeoX frequencies (``partial_rotary_factor``) are our first pairs."""
    neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")
    from transformers import GPTNeoXConfig

    config = GPTNeoXConfig(
        hidden_size=128, num_attention_heads=2, rotary_pct=fraction, rotary_emb_base=500.0
    )  # type: ignore[call-arg]  # legacy names, still accepted by transformers 5
    inv_freq, _ = neox.GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    theta = partial_rotary_theta(64, fraction, base=500.0)
    rotated = len(inv_freq)
    assert rotated == int(64 * fraction) // 2
    torch.testing.assert_close(theta[:rotated], inv_freq.double(), rtol=1e-6, atol=0)
    assert theta[rotated:].eq(0).all()


@pytest.mark.parametrize("fraction", [0.25, 0.5, 1.0])
def test_gpt_neox_partial_rotary_is_rope_with_our_table_up_to_a_permutation(
    fraction: float,
) -> None:
    """Hugging Face's GPT-NeoX attention rotation equals ours with the partial-rotary table.

    GPT-NeoX rotates dims (i, i + r/2) for i < r/2 and passes dims r.. through;
    reading its dimensions in the order of our half layout makes them equal.
    """
    neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")
    from transformers import GPTNeoXConfig

    dim, seq_len = 64, 40
    config = GPTNeoXConfig(
        hidden_size=2 * dim, num_attention_heads=2, rotary_pct=fraction, rotary_emb_base=100.0
    )  # type: ignore[call-arg]  # legacy names, still accepted by transformers 5
    x = random_features(1, 2, seq_len, dim, seed=3).float()
    cos, sin = neox.GPTNeoXRotaryEmbedding(config)(x, torch.arange(seq_len)[None])
    theirs, _ = neox.apply_rotary_pos_emb(x, x, cos, sin)
    rotary = int(dim * fraction)
    passed = torch.arange(rotary, dim)  # unrotated dims, two per remaining pair
    first = torch.cat((torch.arange(rotary // 2), passed[0::2]))
    second = torch.cat((torch.arange(rotary // 2, rotary), passed[1::2]))
    order = torch.cat((first, second))  # our half layout: pair k = (k, k + d/2)
    theta = partial_rotary_theta(dim, fraction, base=100.0)
    ours = apply_rope(x[..., order], theta=theta, layout="half")
    torch.testing.assert_close(ours, theirs[..., order], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("p", [0.25, 0.5, 0.75, 1.0])
def test_prope_matches_transformers_proportional_rope(p: float) -> None:
    """Hugging Face's "proportional" RoPE (Gemma's rope_proportion) is p-RoPE."""
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
    from transformers import GPTNeoXConfig

    config = GPTNeoXConfig(
        hidden_size=128,
        num_attention_heads=2,
        rope_parameters={"rope_type": "proportional", "rope_theta": 500.0},
    )
    assert config.rope_parameters is not None
    config.rope_parameters["partial_rotary_factor"] = p
    inv_freq, _ = rope_utils.ROPE_INIT_FUNCTIONS["proportional"](config)
    torch.testing.assert_close(prope_theta(64, p, base=500.0), inv_freq.double(), rtol=1e-6, atol=0)


def test_partial_rotary_and_prope_differ_where_the_chapter_says() -> None:
    """Same number of rotating pairs; partial rotary keeps the lowest frequency, p-RoPE does not."""
    partial, prope = partial_rotary_theta(64, 0.25, 100.0), prope_theta(64, 0.25, 100.0)
    assert partial.count_nonzero() == prope.count_nonzero() == 8
    assert partial[7] == pytest.approx(100 ** (-14 / 16))
    assert prope[7] == pytest.approx(100 ** (-14 / 64))
    assert partial[7] < frequencies(64, 100.0)[-8] < prope[7]


def _model(layout: Layout = "interleaved") -> TinyTransformer:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=32, n_heads=2, rope=Rope(16, layout=layout))
    return TinyTransformer(config).eval()


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_ablating_every_pair_makes_attention_uniform(layout: Layout) -> None:
    """Zero queries and keys give zero scores, hence uniform causal weights 1/(t+1)."""
    model = _model(layout)
    tokens = torch.randint(0, 11, (2, 7))
    ablated = ablate_pairs(model, range(8), layers=[1])
    _, weights = ablated.attention_maps(tokens)
    uniform = torch.tril(torch.ones(7, 7)) / torch.arange(1, 8).unsqueeze(-1)
    torch.testing.assert_close(weights[1], uniform.expand_as(weights[1]))
    _, before = model.attention_maps(tokens)
    torch.testing.assert_close(weights[0], before[0])  # layer 0 untouched
    assert not torch.allclose(before[1], uniform.expand_as(before[1]))  # it was not uniform


def test_ablation_zeroes_exactly_the_chosen_rows_and_copies() -> None:
    model = _model()
    original = attention_of(model, 0).qkv.weight.clone()
    ablated = ablate_pairs(model, [0, 3], heads=[1])
    weight = attention_of(ablated, 0).qkv.weight
    zeroed = [16 + d for d in (0, 1, 6, 7)]
    rows = zeroed + [32 + r for r in zeroed]
    assert weight[rows].eq(0).all()
    kept = [r for r in range(96) if r not in rows]
    torch.testing.assert_close(weight[kept], original[kept])
    torch.testing.assert_close(attention_of(model, 0).qkv.weight, original)


def test_pair_mask_ablates_each_head_its_own_pairs() -> None:
    """Head 0 of layer 0 loses pair 1 and head 1 of layer 1 pair 7; nothing else moves,
    and a mask of one set everywhere is ablate_pairs."""
    model = _model()
    drop = torch.zeros(2, 2, 8, dtype=torch.bool)
    drop[0, 0, 1] = drop[1, 1, 7] = True
    ablated = ablate_pair_mask(model, drop)
    for layer, rows in ((0, [2, 3]), (1, [16 + 14, 16 + 15])):
        weight, original = (
            attention_of(ablated, layer).qkv.weight,
            attention_of(model, layer).qkv.weight,
        )
        zeroed = rows + [32 + r for r in rows]
        assert weight[zeroed].eq(0).all() and not original[zeroed].eq(0).any()
        kept = [r for r in range(96) if r not in zeroed]
        torch.testing.assert_close(weight[kept], original[kept])
    everywhere = torch.zeros(2, 2, 8, dtype=torch.bool)
    everywhere[..., [0, 5]] = True
    for a, b in zip(
        ablate_pair_mask(model, everywhere).parameters(),
        ablate_pairs(model, [0, 5]).parameters(),
        strict=True,
    ):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_pair_energy_shares_sum_to_one_and_follow_the_norms(layout: Layout) -> None:
    """Shares are mean squared pair norms over the mean squared norm: they sum to 1 per
    head, and a query that lives in pair 2 alone puts all its share there."""
    model = _model(layout)
    rope = model.config.rope
    assert rope is not None
    layers = model.layer_qkv(torch.randint(0, 11, (3, 9)))
    queries, keys = pair_energy_shares(layers, rope)
    assert queries.shape == keys.shape == (2, 2, 8) and queries.dtype == torch.float64
    torch.testing.assert_close(queries.sum(-1), torch.ones(2, 2, dtype=torch.float64))
    q = layers[0].q.clone()
    direct = (q.double() ** 2).sum(-1).mean(dim=(0, 2))  # (H,): mean squared norm
    by_pair = (pair_norms(q, rope).double() ** 2).mean(dim=(0, 2))  # (H, 8)
    torch.testing.assert_close(queries[0], by_pair / direct[:, None])
    only_pair_2 = torch.zeros_like(q)
    dims = pair_dims(rope)[2]
    only_pair_2[..., dims] = q[..., dims]
    single = pair_energy_shares([layers[0]._replace(q=only_pair_2)], rope)[0]
    assert single[0, :, 2].eq(1).all() and single[0, :, [0, 1, 3]].eq(0).all()


def test_offset_attention_by_hand() -> None:
    eye = torch.eye(5)
    previous = torch.diag(torch.ones(4), -1)
    previous[0, 0] = 1.0
    assert offset_attention(eye, 0).item() == 1.0 and offset_attention(eye, 1).item() == 0.0
    assert offset_attention(previous, 1).item() == 1.0
    assert offset_attention(previous, 0).item() == pytest.approx(0.2)
    with pytest.raises(ValueError, match="square"):
        offset_attention(torch.rand(3, 5), 1)


@given(dim=dims, layout=layouts, seed=seeds)
def test_spread_vector_puts_its_norm_on_the_chosen_pairs(
    dim: int, layout: Layout, seed: int
) -> None:
    generator = torch.Generator().manual_seed(seed)
    chosen = sorted(set(torch.randint(0, dim // 2, (3,), generator=generator).tolist()))
    rope = Rope(dim, layout=layout)
    norms = pair_norms(spread_vector(dim, chosen, 2.0, rope=rope), rope)
    expected = torch.zeros(dim // 2, dtype=torch.float64)
    expected[chosen] = 2.0 / math.sqrt(len(chosen))
    torch.testing.assert_close(norms, expected)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_hand_built_heads_are_diagonal_and_previous_token(layout: Layout) -> None:
    """Theorem 5.3 of Barbero et al.: large norm in the fast pairs gives sharp positional heads."""
    seq_len, dim, pairs = 24, 16, [0, 1, 2]
    rope = Rope(dim, layout=layout)
    q, k = diagonal_head(dim, seq_len, pairs, 40.0, rope=rope)
    v = torch.zeros_like(q)
    _, weights = attention(q, k, v, rope=rope, return_weights=True)
    assert offset_attention(weights[0, 0], 0) > 0.99
    q, k = previous_token_head(dim, seq_len, pairs, 40.0, rope=rope)
    _, weights = attention(q, k, v, rope=rope, return_weights=True)
    assert offset_attention(weights[0, 0], 1) > 0.99
    # Without RoPE the same queries and keys attend uniformly: the positions did the work.
    _, weights = attention(q, k, v, placement="nope", return_weights=True)
    assert offset_attention(weights[0, 0], 1) < 0.2


@given(seed=seeds, dim=dims)
def test_a_nope_head_cannot_tell_a_repeated_token_apart(seed: int, dim: int) -> None:
    """Barbero et al., Prop. 5.2: on [BOS, x, x] the last query weighs keys 1 and 2 equally."""
    gen = torch.Generator().manual_seed(seed)
    bos, x = torch.randn(2, dim, generator=gen, dtype=torch.float64)
    inputs = torch.stack((bos, x, x))  # (3, d)
    w_q, w_k = torch.randn(2, dim, dim, generator=gen, dtype=torch.float64) / math.sqrt(dim)
    q, k = ((inputs @ w).expand(1, 1, 3, dim) for w in (w_q, w_k))
    _, weights = attention(q, k, k, placement="nope", return_weights=True)
    assert weights[0, 0, 2, 1].item() == pytest.approx(weights[0, 0, 2, 2].item(), rel=1e-12)
    assert weights[0, 0, 2, 2] <= 0.5 + 1e-12
    _, rotated = attention(q, k, k, placement="qk", return_weights=True)
    assert abs(rotated[0, 0, 2, 1] - rotated[0, 0, 2, 2]) > 1e-9  # RoPE does tell them apart


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: pair_norms(torch.ones(3, 5)), ValueError),
        (lambda: pair_norms(torch.ones(4, dtype=torch.long)), TypeError),
        # deliberately ill-typed: the runtime check is under test
        (lambda: pair_norms([1.0, 2.0]), TypeError),  # type: ignore[arg-type]
        # deliberately ill-typed: the runtime check is under test
        (lambda: pair_norms(torch.ones(4), "rows"), TypeError),  # type: ignore[arg-type]
        (lambda: pair_norms(torch.ones(4), Rope(6)), ValueError),
        (lambda: wavelengths(5), ValueError),
        (lambda: wavelengths(4, base=-1.0), ValueError),
        (lambda: turns(4, -1.0), ValueError),
        (lambda: turns(4, math.inf), ValueError),
        # deliberately ill-typed: the runtime check is under test
        (lambda: turns(4, "8"), TypeError),  # type: ignore[arg-type]
        (lambda: turn_counts(Rope(4), 0), ValueError),
        (lambda: turn_counts([1.0, -1.0], 8), ValueError),
        # deliberately ill-typed: the runtime check is under test
        (lambda: turn_counts("rope", 8), TypeError),  # type: ignore[arg-type]
        (lambda: partial_rotary_theta(12, 0.25), ValueError),  # 3 rotated dims
        (lambda: partial_rotary_theta(8, 1.5), ValueError),
        (lambda: prope_theta(8, -0.1), ValueError),
        (lambda: ablate_pairs(_model(), [8]), ValueError),
        # deliberately ill-typed: the runtime check is under test
        (lambda: ablate_pairs(_model(), [1.0]), TypeError),  # type: ignore[list-item]
        (lambda: ablate_pairs(_model(), [0], layers=[2]), ValueError),
        # deliberately ill-typed: the runtime check is under test
        (lambda: ablate_pairs(torch.nn.Linear(2, 2), [0]), TypeError),  # type: ignore[arg-type]
        (lambda: ablate_pair_mask(_model(), torch.zeros(2, 2, 7, dtype=torch.bool)), ValueError),
        (lambda: ablate_pair_mask(_model(), torch.zeros(2, 2, 8)), TypeError),
        (lambda: offset_attention(torch.eye(3), 3), ValueError),
        (lambda: offset_attention(torch.ones(3), 0), TypeError),
        (lambda: spread_vector(8, []), ValueError),
        (lambda: spread_vector(8, [0], norm=0.0), ValueError),
    ],
)
def test_bad_input_is_refused(call: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        call()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"kv_heads": 1}, "kv_heads"),  # W_k has H_kv * D rows: head 1's "key rows" are W_v's
        ({"kv_heads": 1, "shared_kv": True}, "shared_kv"),
        ({"shared_kv": True}, "shared_kv"),  # one W_kv: its rows are the values too
        ({"qk_norm": True}, "qk_norm"),  # RMS norm rescales the pairs left
    ],
)
def test_ablation_refuses_models_whose_key_rows_it_cannot_zero_alone(
    fields: dict[str, object], named: str
) -> None:
    """Zeroing a pair of the queries and keys must change nothing else: with fewer key heads
    than query heads or keys shared with values, the rows after W_q are not one key head per
    query head (pair 0 of the last head would zero rows of W_v); with QK-norm the other pairs
    would be scaled up to fill the norm. Both are refused, by ablate_pairs too."""
    config = ModelConfig(vocab_size=11, dim=32, n_heads=2, **fields)  # type: ignore[arg-type]
    model = TinyTransformer(config).eval()
    drop = torch.zeros(2, 2, 8, dtype=torch.bool)
    drop[:, :, 0] = True
    with pytest.raises(ValueError, match=named):
        ablate_pair_mask(model, drop)
    with pytest.raises(ValueError, match=named):
        ablate_pairs(model, [0])


def test_norm_matched_pairs_refuse_shares_that_are_not_finite() -> None:
    """A NaN share would compare false everywhere and leave its head with no pairs."""
    shares = torch.full((2, 8), 1 / 8, dtype=torch.float64)
    shares[1, 3] = math.nan
    with pytest.raises(ValueError, match="finite"):
        norm_matched_pairs(shares, [0, 1], torch.Generator().manual_seed(0))
    shares[1, 3] = math.inf
    with pytest.raises(ValueError, match="finite"):
        norm_matched_pairs(shares, [0, 1], torch.Generator().manual_seed(0))


def test_norm_matched_pairs_match_the_quarter_and_avoid_it() -> None:
    shares = torch.rand(3, 4, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    shares = shares / shares.sum(-1, keepdim=True)
    quarter = [0, 1, 2, 3]
    chosen = norm_matched_pairs(shares, quarter, torch.Generator().manual_seed(0))
    assert chosen.shape == shares.shape and chosen.dtype == torch.bool
    assert not bool(chosen[..., quarter].any())
    matched = (shares * chosen).sum(-1)
    target = shares[..., quarter].sum(-1)
    largest = shares.amax(-1)  # the greedy walk stops within one pair of the target
    assert bool(((matched - target).abs() <= largest).all())
