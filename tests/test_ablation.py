"""Pair ablations by zero and by mean (rope_lessons.chapters.ablation), on small untrained toys.

The hooks must do what chapter 5's weight surgery does where both apply,
put exactly the means in place of a pair, leave the model as it was
afterwards, and refuse what they cannot do.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import attention_of
from hypothesis import given, settings
from hypothesis import strategies as st

from rope_lessons._checks import Layout
from rope_lessons.chapters.ablation import (
    ALL_POSITIONS,
    FIRST_KEPT,
    FIRST_ONLY,
    AblationSet,
    ablation_costs,
    cost_table,
    interval,
    norm_matched_sets,
    pairs_ablated,
    projection_means,
    quarter_sets,
    replacing_pairs,
)
from rope_lessons.chapters.spectrum import ablate_pair_mask, pair_columns, pair_dims
from rope_lessons.evidence.runs import held_out
from rope_lessons.evidence.training import evaluate
from rope_lessons.rope.spec import Rope
from rope_lessons.sweeps import load_sweep
from rope_lessons.sweeps.ch05_frequencies import CORPUS
from rope_lessons.sweeps.ch05_mean_ablation import (
    MATCHED_DRAWS,
    RANDOM_DRAWS,
    ablation_analysis,
    stored_costs,
)
from rope_lessons.toy.model import ModelConfig, TinyTransformer

TOKENS = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))


def _model(layout: Layout = "interleaved", **fields: object) -> TinyTransformer:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=32, n_heads=2, rope=Rope(16, layout=layout), **fields)  # type: ignore[arg-type]
    return TinyTransformer(config).eval()


def test_pair_columns_are_the_pairs_features_in_their_head() -> None:
    drop = torch.zeros(2, 8, dtype=torch.bool)
    drop[1, 3] = True  # head 1, pair 3 of a 16-dim head
    assert pair_columns(drop, Rope(16, layout="half")).tolist() == [16 + 3, 16 + 3 + 8]
    assert pair_columns(drop, Rope(16)).tolist() == [16 + 6, 16 + 7]
    assert pair_columns(torch.zeros(2, 8, dtype=torch.bool), Rope(16)).numel() == 0


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.booleans(), min_size=32, max_size=32),
    st.sampled_from(["interleaved", "half"]),
)
def test_zeroing_query_pairs_is_chapter_5s_ablation(flags: list[bool], layout: Layout) -> None:
    """A zero query pair removes the pair's score term, as zeroing the rows of W_q and W_k
    does (chapter 5's ablate_pair_mask): the same logits, for any set of pairs per head."""
    model = _model(layout)
    drop = torch.tensor(flags).view(2, 2, 8)
    expected = ablate_pair_mask(model, drop)(TOKENS)
    with pairs_ablated(model, drop, side="query", fill="zero"):
        torch.testing.assert_close(model(TOKENS), expected)
    with pairs_ablated(model, drop, side="key", fill="zero"):
        torch.testing.assert_close(model(TOKENS), expected)


def test_mean_ablation_puts_exactly_the_means_in_place() -> None:
    model = _model("half")
    query_means, key_means = projection_means(model.layer_qkv(TOKENS))
    assert query_means.shape == key_means.shape == (2, 2, 16)
    drop = torch.zeros(2, 2, 8, dtype=torch.bool)
    drop[1, 0, 2] = True  # the last layer only: layer 0's inputs stay the same
    dims = pair_dims(model.config.rope)[2]  # type: ignore[arg-type]
    with torch.no_grad():
        intact = model.layer_qkv(TOKENS)
    for side, means in (("query", query_means), ("key", key_means)):
        ablating = pairs_ablated(model, drop, side=side, fill="mean", means=means)  # type: ignore[arg-type]
        with ablating, torch.no_grad():
            ablated = model.layer_qkv(TOKENS)
        index = 0 if side == "query" else 1
        replaced = ablated[1][index][:, 0, :, dims]  # (B, T, 2)
        torch.testing.assert_close(replaced, means[1, 0, dims].expand_as(replaced))
        before = intact[1][index][:, 0, :, dims]
        assert float((before - replaced).abs().max()) > 1e-3  # the pair did vary by token
        kept = [d for d in range(16) if d not in dims.tolist()]
        torch.testing.assert_close(
            ablated[1][index][:, 0, :, kept], intact[1][index][:, 0, :, kept]
        )
        torch.testing.assert_close(ablated[1][index][:, 1], intact[1][index][:, 1])
        torch.testing.assert_close(ablated[0].q, intact[0].q)


def test_positions_choose_the_tokens_whose_pairs_are_replaced() -> None:
    """FIRST_KEPT replaces every token's pair but the first's, FIRST_ONLY the first's
    alone; the two together replace what the default replaces."""
    model = _model("half")
    query_means, _ = projection_means(model.layer_qkv(TOKENS))
    drop = torch.zeros(2, 2, 8, dtype=torch.bool)
    drop[1, 1, 5] = True
    dims = pair_dims(model.config.rope)[5]  # type: ignore[arg-type]
    projections = [attention_of(model, layer).qkv for layer in range(2)]
    rope = model.config.rope
    assert rope is not None
    with torch.no_grad():
        intact = model.layer_qkv(TOKENS)[1].q[:, 1, :, dims]  # (B, T, 2)
        read = {}
        for name, where in (("all", ALL_POSITIONS), ("kept", FIRST_KEPT), ("only", FIRST_ONLY)):
            with replacing_pairs(projections, drop, rope, means=query_means, positions=where):
                read[name] = model.layer_qkv(TOKENS)[1].q[:, 1, :, dims]
    mean = query_means[1, 1, dims].expand_as(intact)
    torch.testing.assert_close(read["all"], mean)
    torch.testing.assert_close(read["kept"][:, 0], intact[:, 0])
    torch.testing.assert_close(read["kept"][:, 1:], mean[:, 1:])
    torch.testing.assert_close(read["only"][:, 0], mean[:, 0])
    torch.testing.assert_close(read["only"][:, 1:], intact[:, 1:])


def test_mean_ablation_of_a_constant_pair_changes_nothing() -> None:
    """A pair whose query is the same for every token loses nothing to mean-ablation
    but its whole term to zero-ablation: the case the mean control is for."""
    model = _model()
    qkv = attention_of(model, 0).qkv
    with torch.no_grad():
        qkv.weight[[0, 1]] = 0.0  # pair 0 of head 0: constant (2, -1) from the bias
        qkv.bias = torch.nn.Parameter(torch.zeros(32 * 3))
        qkv.bias[[0, 1]] = torch.tensor([2.0, -1.0])
    means, _ = projection_means(model.layer_qkv(TOKENS))
    drop = torch.zeros(2, 2, 8, dtype=torch.bool)
    drop[0, 0, 0] = True
    with torch.no_grad():
        intact = model(TOKENS)
        with pairs_ablated(model, drop, fill="mean", means=means):
            torch.testing.assert_close(model(TOKENS), intact)
        with pairs_ablated(model, drop, fill="zero"):
            assert float((model(TOKENS) - intact).abs().max()) > 1e-4


def test_hooks_are_removed_even_after_an_error() -> None:
    model = _model().requires_grad_(False)
    intact = model(TOKENS)
    with pytest.raises(KeyError), pairs_ablated(model, torch.ones(8, dtype=torch.bool)):
        assert float((model(TOKENS) - intact).abs().max()) > 1e-4
        raise KeyError("inside")
    assert torch.equal(model(TOKENS), intact)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda m: pairs_ablated(m, torch.zeros(2, 2, 7, dtype=torch.bool)),
            ValueError,
            "broadcast",
        ),
        (lambda m: pairs_ablated(m, torch.zeros(8)), TypeError, "bool"),
        (
            lambda m: pairs_ablated(m, torch.ones(8, dtype=torch.bool), fill="mean"),
            ValueError,
            "means",
        ),
        (
            lambda m: pairs_ablated(
                m, torch.ones(8, dtype=torch.bool), fill="mean", means=torch.zeros(2, 2, 8)
            ),
            ValueError,
            "shape",
        ),
        (
            lambda m: pairs_ablated(m, torch.ones(8, dtype=torch.bool), side="value"),  # type: ignore[arg-type]
            ValueError,
            "side",
        ),
        (
            lambda m: pairs_ablated(m, torch.ones(8, dtype=torch.bool), fill="one"),  # type: ignore[arg-type]
            ValueError,
            "fill",
        ),
        (
            lambda m: pairs_ablated(torch.nn.Linear(2, 2), torch.ones(8, dtype=torch.bool)),  # type: ignore[arg-type]
            TypeError,
            "TinyTransformer",
        ),
    ],
)
def test_bad_ablations_are_refused(call: object, error: type[Exception], message: str) -> None:
    model = _model()
    with pytest.raises(error, match=message), call(model):  # type: ignore[operator]
        pass


def test_a_key_ablation_is_refused_where_keys_are_values() -> None:
    model = _model(shared_kv=True, kv_heads=1)
    with (
        pytest.raises(ValueError, match="shared_kv"),
        pairs_ablated(model, torch.ones(8, dtype=torch.bool), side="key"),
    ):
        pass
    # with one key/value head, a key-side mask has one head
    grouped = _model(kv_heads=1)
    with pairs_ablated(grouped, torch.ones(2, 1, 8, dtype=torch.bool), side="key"):
        grouped(TOKENS)
    with (
        pytest.raises(ValueError, match=r"\(2, 1, 8\)"),
        pairs_ablated(grouped, torch.ones(2, 2, 8, dtype=torch.bool), side="key"),
    ):
        pass


def test_quarter_sets_are_the_four_quarters_then_random_ones() -> None:
    sets = quarter_sets(16, 3, torch.Generator().manual_seed(0))
    assert [s.name for s in sets[:4]] == ["pairs 0-3", "pairs 4-7", "pairs 8-11", "pairs 12-15"]
    assert torch.stack([s.drop for s in sets[:4]]).sum(0).eq(1).all()  # a partition
    assert all(s.name == "random quarter" and int(s.drop.sum()) == 4 for s in sets[4:])
    assert len(sets) == 7 and all(s.uniform for s in sets)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_norm_matched_sets_match_the_norm_in_the_heads_they_keep(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    shares = torch.rand(3, 4, 16, generator=generator, dtype=torch.float64) ** 4
    shares /= shares.sum(-1, keepdim=True)
    quarter = [12, 13, 14, 15]
    try:
        sets = norm_matched_sets(shares, quarter, 2, generator)
    except ValueError as error:  # no head could be matched: said so
        assert "no head" in str(error)
        return
    assert [s.name for s in sets] == [
        "pairs 12-15, matched heads",
        "norm-matched to pairs 12-15",
    ] * 2
    for own, control in zip(sets[::2], sets[1::2], strict=True):
        heads = own.drop.any(-1)
        assert torch.equal(heads, control.drop.any(-1))  # the same heads
        assert not (own.drop & control.drop).any()  # the control lies outside the quarter
        removed_own = (shares * own.drop).sum(-1)[heads]
        removed_control = (shares * control.drop).sum(-1)[heads]
        assert bool((removed_control >= 0.9 * removed_own - 1e-12).all())
        assert own.share == pytest.approx(float(removed_own.mean()))
        assert control.share == pytest.approx(float(removed_control.mean()))


def test_ablation_costs_run_every_reading_and_group_by_name() -> None:
    model = _model()
    means = projection_means(model.layer_qkv(TOKENS))
    targets = torch.randint(0, 11, TOKENS.shape, generator=torch.Generator().manual_seed(2))

    def loss() -> float:
        with torch.no_grad():
            logits = model(TOKENS)
        return float(torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten()))

    def ablate(drop: torch.Tensor, **options: object) -> object:
        return pairs_ablated(model, drop, **options)  # type: ignore[arg-type]

    per_head = torch.zeros(2, 2, 8, dtype=torch.bool)
    per_head[0, 1, 3] = True
    sets = [
        *quarter_sets(8, 2, torch.Generator().manual_seed(0)),
        AblationSet("one pair", per_head, 0.2),
    ]
    intact = loss()
    costs = ablation_costs(loss, intact, ablate, sets, means)  # type: ignore[arg-type]
    assert [c.name for c in costs] == [s.name for s in sets]
    assert costs[-1].mean_key is None and costs[0].mean_key is not None
    with pairs_ablated(model, sets[0].drop):
        assert costs[0].zero == pytest.approx(loss() - intact)
    with pairs_ablated(model, sets[1].drop, side="key", fill="mean", means=means[1]):
        assert costs[1].mean_key == pytest.approx(loss() - intact)
    table = cost_table(costs)
    assert list(table) == [
        "pairs 0-1",
        "pairs 2-3",
        "pairs 4-5",
        "pairs 6-7",
        "random quarter",
        "one pair",
    ]
    assert len(table["random quarter"]["zero"]) == 2 and table["one pair"]["share"] == [0.2]
    assert "mean_key" not in table["one pair"]
    calls = 0

    def counted_loss() -> float:
        nonlocal calls
        calls += 1
        return loss()

    queries_only = ablation_costs(counted_loss, intact, ablate, sets, means, keys=False)  # type: ignore[arg-type]
    assert calls == 2 * len(sets)  # zero and mean of the queries, no key evaluation
    assert all(c.mean_key is None for c in queries_only)
    for with_keys, without in zip(costs, queries_only, strict=True):
        assert (without.zero, without.mean_query) == (with_keys.zero, with_keys.mean_query)


def test_interval_is_a_t_interval_over_the_values() -> None:
    assert interval([0.5]) == "0.500"
    # mean 2, sd 1, n 3: half-width t(2) * 1 / sqrt(3) = 4.303 / 1.732 = 2.484
    assert interval([1.0, 2.0, 3.0]) == "2.000 ± 2.484 (1.000 to 3.000, n=3)"


def test_the_toy_sweep_stores_every_reading_of_every_set() -> None:
    """ch05_mean_ablation: for each seed, the four quarters and the random quarters in
    three readings, the norm-matched pairs in two, with the shares they remove; read back
    by stored_costs in the order ablation_costs gave them."""
    stored = load_sweep("ch05_mean_ablation")
    runs = stored.results("corpus")
    assert sorted(run.seed for run in runs) == [0, 1, 2, 3, 4]
    for run in runs:
        table = cost_table(stored_costs(run.extra))
        assert list(table)[:4] == ["pairs 0-3", "pairs 4-7", "pairs 8-11", "pairs 12-15"]
        assert len(table["random quarter"]["mean_key"]) == RANDOM_DRAWS
        for quarter in ("pairs 0-3", "pairs 12-15"):
            own, control = table[f"{quarter}, matched heads"], table[f"norm-matched to {quarter}"]
            assert len(own["zero"]) == len(control["mean_query"]) == MATCHED_DRAWS
            assert "mean_key" not in control
            assert all(c >= 0.9 * o for o, c in zip(own["share"], control["share"], strict=True))
        assert 1.0 < run.extra["loss"] < 2.5  # nats per character, a trained model


def test_the_toy_analysis_is_the_ablations_it_names() -> None:
    """The analysis of an (untrained) toy equals running the same ablations by hand."""
    run = dataclasses.replace(CORPUS, eval_batches=1)
    torch.manual_seed(0)
    model = run.model.build().eval()
    numbers = ablation_analysis(model, run, torch.device("cpu"))
    tokens = held_out(run.data, run.train_len)()[0][:64]
    query_means, key_means = projection_means(model.layer_qkv(tokens))

    def loss() -> float:
        return evaluate(model, held_out(run.data, run.train_len), batches=1).loss

    slowest = torch.arange(16) >= 12
    with pairs_ablated(model, slowest, side="key", fill="mean", means=key_means):
        assert numbers["mean_key | pairs 12-15 | 0"] == pytest.approx(loss() - numbers["loss"])
    with pairs_ablated(model, slowest, fill="mean", means=query_means):
        assert numbers["mean_query | pairs 12-15 | 0"] == pytest.approx(loss() - numbers["loss"])


def test_the_toy_sweep_trained_chapter_5s_models_again() -> None:
    """ch05_mean_ablation retrains ch05_frequencies' corpus runs (same recipe and seeds) and
    removes pairs with hooks instead of weight surgery: where both measure the same thing,
    the stored numbers agree."""
    old = {run.seed: run.extra for run in load_sweep("ch05_frequencies").results("corpus")}
    new = {run.seed: run.extra for run in load_sweep("ch05_mean_ablation").results("corpus")}
    assert sorted(old) == sorted(new)
    for seed, extra in new.items():
        intact = old[seed]["loss"]
        assert extra["loss"] == pytest.approx(intact, abs=1e-6)
        for name, key in (("pairs 0-3", "loss_without_fast"), ("pairs 12-15", "loss_without_slow")):
            cost = old[seed][key] - intact
            assert extra[f"zero | {name} | 0"] == pytest.approx(cost, abs=1e-6)
