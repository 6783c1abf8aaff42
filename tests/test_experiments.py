"""Experiment runner: runs repeat for a seed, held-out data is held out, summaries are right."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from rope_lessons.evidence.comparisons import (
    accuracy_by_length,
    compare_paired,
    metric_by_length,
    summarise,
    t_quantile,
)
from rope_lessons.evidence.runs import (
    CHECKPOINTS,
    EVAL_SEED_OFFSET,
    Run,
    RunResult,
    held_out,
    make_run,
    metric,
    order_run,
    run_once,
    run_seeds,
    steps_to_reach,
    train_run,
)
from rope_lessons.evidence.training import Metrics, evaluate, train
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.synthetic import IGNORE, CopyAtLag, WhichFirst, batch_sampler


def test_summary_statistics() -> None:
    s = summarise([1.0, 2.0, 3.0])
    assert (s.mean, s.low, s.high, s.n) == (2.0, 1.0, 3.0, 3)
    assert s.std == pytest.approx(1.0)
    assert s.sem == pytest.approx(1.0 / math.sqrt(3))
    assert summarise([0.5]).std == 0.0
    with pytest.raises(ValueError, match="at least one"):
        summarise([])


def one_batch(run: Run[TinyTransformer]) -> Run[TinyTransformer]:
    """``run`` evaluated on one held-out batch, not four: the tests below check what a
    run does (its steps, checkpoints and repeats), which the batch count does not change."""
    return dataclasses.replace(run, eval_batches=1)


def test_a_run_repeats_exactly_for_the_same_seed() -> None:
    run = one_batch(order_run("sinusoidal", steps=5))
    a, b = run_once(run, seed=3, progress=False), run_once(run, seed=3, progress=False)
    assert a.losses == b.losses
    assert a.metrics == b.metrics
    assert sorted(a.metrics) == [16, 32, 64]


def test_learned_positions_skip_lengths_beyond_their_table() -> None:
    results = run_seeds(order_run("learned", steps=3), seeds=[0, 1], progress=False)
    assert sorted(accuracy_by_length(results)) == [16]


def test_order_run_overrides_model_fields_and_names_them_in_the_label() -> None:
    run = order_run("rope", causal=True, placement="vo", steps=1)
    assert isinstance(run.model, ModelConfig)
    assert run.model.placement == "vo" and run.model.causal
    assert run.label == "rope, causal, placement=vo"
    assert order_run("rope").label != order_run("rope", placement="vo").label


def test_the_order_task_is_evaluated_on_the_validation_stream_of_each_length() -> None:
    """The held-out batches are those of seed EVAL_SEED_OFFSET + length, as chapters 1-3 print."""
    run = order_run("none", steps=2)
    result = run_once(run, seed=0, progress=False)
    torch.manual_seed(0)
    model = run.model.build()
    train(model, batch_sampler(run.data, 32, 16, seed=0), steps=2, progress=False)
    by_hand = evaluate(
        model,
        batch_sampler(run.data, 256, 32, seed=EVAL_SEED_OFFSET + 32),
        batches=4,
        answers=(WhichFirst.A, WhichFirst.B),
    )
    assert result.metrics[32] == by_hand


def test_checkpoints_change_nothing_and_end_at_the_final_metrics() -> None:
    run = one_batch(order_run("rope", steps=30))
    assert run.checkpoint_steps == (6, 12, 18, 24, 25, 30)
    result = run_once(run, seed=1, progress=False)
    assert sorted(result.checkpoints) == [6, 12, 18, 24, 25, 30]
    assert result.checkpoints[30] == result.metrics  # the same batches at every length
    torch.manual_seed(1)
    model = run.model.build()
    plain = train(model, batch_sampler(run.data, 32, 16, seed=1), steps=30, progress=False)
    assert plain.losses == result.losses  # evaluating in between leaves training alone


def test_more_checkpoints_keep_the_prefix_and_the_last_fifth() -> None:
    base = order_run("rope", steps=30)
    finer = dataclasses.replace(base, n_checkpoints=10)
    assert finer.checkpoint_steps == (3, 6, 9, 12, 15, 18, 21, 24, 25, 27, 30)
    # a count that does not divide into fifths still evaluates at the start of the last fifth
    assert dataclasses.replace(base, n_checkpoints=4).checkpoint_steps == (8, 15, 23, 24, 25, 30)
    assert base.n_checkpoints == CHECKPOINTS
    # describe() names the steps, not the count: runs stored before the field are unchanged
    assert "n_checkpoints" not in base.describe()
    assert finer.describe()["checkpoints"] == list(finer.checkpoint_steps)
    with pytest.raises(ValueError, match="n_checkpoints"):
        dataclasses.replace(base, n_checkpoints=0)


def test_steps_to_reach_reads_the_first_evaluation_past_the_threshold() -> None:
    def table(accuracy: float, loss: float) -> dict[int, Metrics]:
        return {8: Metrics(loss=loss, accuracy=accuracy)}

    result = RunResult(
        label="toy",
        seed=0,
        losses=[1.0] * 30,
        metrics=table(1.0, 0.01),
        checkpoints={10: table(0.5, 1.0), 20: table(0.995, 0.1), 30: table(1.0, 0.01)},
    )
    assert steps_to_reach(result, 8, 0.99) == 20
    assert steps_to_reach(result, 8, 0.999) == 30
    assert steps_to_reach(result, 8, 0.4) == 10
    assert steps_to_reach(result, 8, 1.01) is None  # never reached: not solved
    assert steps_to_reach(result, 8, 0.05, "loss") == 30  # a loss must fall to it
    assert steps_to_reach(result, 16, 0.5) is None  # not evaluated at that length
    with pytest.raises(ValueError, match="answer_accuracy"):
        steps_to_reach(result, 8, 0.5, "answer_accuracy")
    with pytest.raises(ValueError, match="name"):
        steps_to_reach(result, 8, 0.5, "accuracy at 8")


def test_a_run_stopped_early_is_the_prefix_of_the_full_run() -> None:
    run = one_batch(order_run("rope", steps=30))
    full = run_once(run, seed=0, progress=False)
    early = run_once(run, seed=0, progress=False, stop_after=12)
    assert early.losses == full.losses[:12]  # same learning-rate schedule, not a shorter one
    assert sorted(early.checkpoints) == [6, 12]
    assert early.checkpoints[12] == full.checkpoints[12] == early.metrics
    shorter = run_once(one_batch(order_run("rope", steps=12)), seed=0, progress=False)
    assert shorter.losses != early.losses  # a 12-step schedule decays sooner


def test_the_smoke_variable_caps_every_training_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROPE_LESSONS_SMOKE_STEPS", "3")
    result = run_once(order_run("rope", steps=30), seed=0, progress=False)
    assert len(result.losses) == 3 and result.extra == {}
    monkeypatch.setenv("ROPE_LESSONS_SMOKE_STEPS", "three")
    with pytest.raises(ValueError, match="ROPE_LESSONS_SMOKE_STEPS must be a positive integer"):
        run_once(order_run("rope", steps=30), seed=0, progress=False)


def test_a_corpus_run_reports_validation_numbers_not_training_numbers() -> None:
    """Training text 'abab…', validation text 'cdcd…': a model that learned the training
    text is near-perfect on it and useless on the validation text. A run that
    scored training text would report the first; it must report the second."""
    corpus = CharCorpus("ab" * 900 + "cd" * 100, val_fraction=0.1)
    assert set(corpus.decode(corpus.splits["val"])) == {"c", "d"}
    run = make_run(
        "tiny",
        corpus,
        train_len=8,
        eval_lens=(8,),
        steps=40,
        eval_batches=1,
        dim=16,
        n_heads=2,
        n_layers=1,
    )
    result = run_once(run, seed=0, progress=False)
    assert result.losses[-1] < 0.1  # it learned the training text
    torch.manual_seed(0)
    model = run.model.build()
    train(model, batch_sampler(corpus, 32, 8, seed=0), steps=40, progress=False)
    on_training_text = evaluate(model, batch_sampler(corpus, 256, 8, seed=8), batches=1)
    assert on_training_text.accuracy > 0.9
    assert result.metrics[8].accuracy < 0.1
    assert result.checkpoints[40] == result.metrics
    assert result.checkpoints[16][8].accuracy < 0.1


def test_make_run_builds_a_run_for_any_task() -> None:
    run = make_run("lag 2", CopyAtLag(lag=2, vocab=5), train_len=8, eval_lens=(8, 16), steps=3)
    assert run.model.vocab_size == 5
    result = run_once(run, seed=0, progress=False)
    assert sorted(result.metrics) == [8, 16]
    assert result.metrics[8].answer_accuracy is None  # no fixed answer set


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (
            lambda: make_run("x", WhichFirst(), train_len=8, eval_lens=(8,), steps=1, vocab_size=5),
            ValueError,
            "vocab_size=5 is smaller than the data's vocabulary",
        ),
        (
            lambda: make_run("", WhichFirst(), train_len=8, eval_lens=(8,), steps=1),
            ValueError,
            "label",
        ),
        (
            lambda: make_run("x", WhichFirst(), train_len=2, eval_lens=(8,), steps=1),
            ValueError,
            "shorter than the data's minimum",
        ),
        (
            lambda: make_run("x", WhichFirst(), train_len=8, eval_lens=[8], steps=0),
            ValueError,
            "steps",
        ),
        (
            lambda: make_run(
                "x", WhichFirst(), train_len=8, eval_lens=(8,), steps=1, analyse=lambda m, r, d: {}
            ),
            ValueError,
            "module-level function",
        ),
        (lambda: run_once(order_run("none", steps=1), seed=-1), ValueError, "seed"),
        (lambda: run_once(order_run("none", steps=1), seed=EVAL_SEED_OFFSET), ValueError, "seed"),
    ],
)
def test_bad_runs_are_refused_with_the_argument_named(
    call: Callable[[], object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        call()


def test_cuda_asked_for_but_absent_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        run_once(order_run("none", steps=1), seed=0, device="cuda")
    with pytest.raises(ValueError, match="must name a torch device"):
        run_once(order_run("none", steps=1), seed=0, device="gpu")


class FixedLogits(nn.Module):
    """Returns the same logits at every position: ``(B, T) -> (B, T, V)``."""

    def __init__(self, logits: list[float]) -> None:
        super().__init__()
        self.logits = torch.tensor(logits)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(*tokens.shape, -1)


def fixed_batches(
    *batches: tuple[torch.Tensor, torch.Tensor],
) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    stream = iter(batches)
    return lambda: next(stream)


def test_two_answers_are_scored_against_each_other_and_neither_is_counted() -> None:
    # Targets A, A, B (A = 0, B = 1); the model always prefers filler 3, then A.
    targets = torch.tensor([[IGNORE, 0], [IGNORE, 0], [IGNORE, 1]])
    tokens = torch.zeros_like(targets)
    model = FixedLogits([2.0, 1.0, 0.0, 5.0])
    m = evaluate(model, fixed_batches((tokens, targets)), batches=1, answers=(0, 1))
    assert m.accuracy == 0.0  # the argmax is always the filler
    assert m.neither == 1.0
    assert m.answer_accuracy == pytest.approx(2 / 3)  # A beats B, right for two of three
    expected_loss = -torch.log_softmax(torch.tensor([2.0, 1.0, 0.0, 5.0]), -1)[[0, 0, 1]].mean()
    assert m.loss == pytest.approx(expected_loss.item(), rel=1e-6)
    with pytest.raises(ValueError, match="do not contain every scored target"):
        evaluate(model, fixed_batches((tokens, targets)), batches=1, answers=(0, 2))


def test_evaluate_never_returns_nan() -> None:
    """A batch without scored positions is skipped, not averaged in as NaN."""
    scored = (torch.zeros(1, 2, dtype=torch.long), torch.tensor([[IGNORE, 1]]))
    unscored = (torch.zeros(1, 2, dtype=torch.long), torch.full((1, 2), IGNORE))
    model = FixedLogits([0.0, 1.0])
    m = evaluate(model, fixed_batches(unscored, scored), batches=2)
    assert not math.isnan(m.loss) and m.accuracy == 1.0
    with pytest.raises(ValueError, match="no scored positions"):
        evaluate(model, fixed_batches(unscored), batches=1)
    with pytest.raises(ValueError, match="not finite"):
        evaluate(FixedLogits([0.0, math.nan]), fixed_batches(scored), batches=1)


def result(label: str, seed: int, accuracy: float) -> RunResult:
    return RunResult(label, seed, [1.0], {16: Metrics(loss=1.0, accuracy=accuracy)})


def test_paired_comparison_pairs_by_seed() -> None:
    first = [result("a", 0, 0.5), result("a", 1, 0.6), result("a", 2, 0.7)]
    second = [result("b", 2, 0.9), result("b", 0, 0.6), result("b", 1, 0.6)]
    paired = compare_paired(first, second, metric(16))
    assert paired.seeds == (0, 1, 2)
    assert paired.differences == pytest.approx((0.1, 0.0, 0.2))
    assert paired.summary.mean == pytest.approx(0.1)
    assert paired.wins == 2
    assert str(paired).startswith("b - a, accuracy at length 16 (higher is better): +0.100")
    assert str(paired).endswith("b better on 2 of 3 seeds: not resolved")
    with pytest.raises(ValueError, match="different seeds"):
        compare_paired(first, second[:2], metric(16))
    with pytest.raises(ValueError, match="was not evaluated at 32"):
        compare_paired(first, second, metric(32))
    with pytest.raises(ValueError, match="has no 'neither'"):
        compare_paired(first, second, metric(16, "neither"))
    assert metric_by_length(first)[16].mean == pytest.approx(0.6)


def test_results_survive_a_json_round_trip() -> None:
    run = order_run("rope", steps=2)
    original = run_once(run, seed=0, progress=False)
    assert RunResult.from_json(json.loads(json.dumps(original.to_json()))) == original


def test_a_run_without_checkpoints_evaluates_once_at_the_end() -> None:
    run = one_batch(order_run("rope", steps=30))
    quick = run_once(run, seed=0, progress=False, checkpoints=False)
    full = run_once(run, seed=0, progress=False)
    assert quick.checkpoints == {} and quick.losses == full.losses
    assert quick.metrics == full.metrics


def losses(label: str, values: dict[int, float]) -> list[RunResult]:
    return [
        RunResult(label, seed, [1.0], {16: Metrics(loss=loss, accuracy=0.5)})
        for seed, loss in values.items()
    ]


def test_paired_comparison_names_the_metric_and_the_better_direction() -> None:
    first = losses("rope", {0: 2.0, 1: 2.0, 2: 2.0})
    second = losses("nope", {0: 2.5, 1: 2.5, 2: 1.5})
    paired = compare_paired(first, second, metric(16, "loss"))
    # the loss rose for two seeds: "larger for 2 of 3" used to read as a win
    assert paired.wins == 2 and paired.better == 1 and paired.lower_is_better
    # differences (0.5, 0.5, -0.5): standard error 1/3, t(2) = 4.303, half-width 1.434
    assert str(paired) == (
        "nope - rope, loss at length 16 (lower is better): +0.167 [-1.268, +1.601] (95%), "
        "nope better on 1 of 3 seeds: not resolved"
    )
    assert paired.report(family=3).endswith(
        "(95% for 3 comparisons), nope better on 1 of 3 seeds: not resolved"
    )


def test_paired_comparison_of_an_unnamed_value_says_what_it_does_not_know() -> None:
    first = losses("a", {0: 2.0, 1: 2.0})
    second = losses("b", {0: 2.5, 1: 1.0})
    paired = compare_paired(first, second, lambda r: r.metrics[16].loss)
    assert paired.better is None and "b - a, value: " in str(paired)
    assert str(paired).endswith("larger on 1 of 2 seeds: not resolved")
    named = compare_paired(
        first, second, lambda r: r.metrics[16].loss, name="my loss", lower_is_better=True
    )
    assert str(named).startswith("b - a, my loss (lower is better)")
    assert named.better == 1


def test_metric_defaults_to_loss_for_a_corpus_and_accuracy_for_a_task() -> None:
    corpus = CharCorpus("ab" * 50)
    assert metric(16, data=corpus) == metric(16, "loss")
    assert metric(16, data=WhichFirst()) == metric(16, "accuracy") == metric(16)
    run = make_run("lm", corpus, train_len=8, eval_lens=(8,), steps=1)
    assert run.metric(8).name == "loss" and run.metric(8, "accuracy").name == "accuracy"
    assert order_run("rope", steps=1).metric(16).name == "accuracy"
    assert metric(16, "neither").lower_is_better and not metric(16).lower_is_better
    with pytest.raises(ValueError, match="name must be one of"):
        metric(16, "perplexity")


def test_the_smoke_variable_evaluates_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []
    sampler = batch_sampler(WhichFirst(n_fillers=8), 4, 16, seed=0)

    def counted() -> tuple[torch.Tensor, torch.Tensor]:
        drawn.append(1)
        return sampler()

    model = order_run("rope", steps=2).model.build()
    evaluate(model, counted, batches=5)
    assert len(drawn) == 5
    monkeypatch.setenv("ROPE_LESSONS_SMOKE_STEPS", "3")
    evaluate(model, counted, batches=5)
    assert len(drawn) == 6


def test_train_run_hands_back_the_model_it_evaluated() -> None:
    run = one_batch(order_run("rope", steps=20))
    model, result = train_run(run, seed=0, progress=False)
    assert numbers_of(result) == numbers_of(run_once(run, seed=0, progress=False))
    assert isinstance(run.data, WhichFirst)  # the order task: a fixed answer set
    for length in run.eval_lens:
        again = evaluate(
            model, held_out(run.data, length), batches=run.eval_batches, answers=run.data.answers
        )
        assert again == result.metrics[length]  # the model's own held-out numbers
    first, second = held_out(run.data, 16, batch_size=8)(), held_out(run.data, 16, batch_size=8)()
    assert torch.equal(first[0], second[0])  # the same validation batch every time
    with pytest.raises(ValueError, match="seed must be an int"):
        train_run(run, seed=-1)


def numbers_of(result: RunResult) -> RunResult:
    return dataclasses.replace(result, wall_seconds=0.0)


def test_paired_extras_and_independent_differences_carry_95_percent_intervals() -> None:
    from rope_lessons.evidence.comparisons import (
        compare_extras,
        compare_readings,
        difference_of_means,
        paired_differences,
        t_quantile_975,
    )
    from rope_lessons.evidence.runs import RunResult

    results = [
        RunResult("m", seed, [1.0], extra={"a": 1.0, "b": 1.0 + gap})
        for seed, gap in enumerate((0.1, 0.3, 0.2))
    ]
    paired = compare_extras(results, "a", "b")
    assert paired.summary.mean == pytest.approx(0.2)
    # sd of (0.1, 0.3, 0.2) is 0.1; t(2) = 4.303
    assert paired.half_width == pytest.approx(4.303 * 0.1 / math.sqrt(3), rel=1e-4)
    assert not paired.resolved and paired.better == 0
    assert compare_extras(results, "a", "a").summary.mean == 0.0
    with pytest.raises(ValueError, match="each seed once"):
        compare_extras(results + results[:1], "a", "b")
    # any two readings of the same results, not only stored extras
    readings = compare_readings(
        results,
        lambda r: 2 * r.extra["a"],
        lambda r: r.extra["b"] + r.extra["a"],
        names=("twice a", "a + b"),
        metric="sum",
    )
    assert readings.differences == pytest.approx(paired.differences)
    assert str(readings).startswith("a + b - twice a, sum (lower is better): +0.200")
    with pytest.raises(ValueError, match="each seed once"):
        compare_readings([], lambda r: 0.0, lambda r: 0.0)
    # differences paired by something else than seeds: three passages of one model
    passages = paired_differences(
        [-0.2, -0.21, -0.19],
        names=("a", "b"),
        metric="loss",
        lower_is_better=True,
        unit="passages",
    )
    assert passages.seeds == (0, 1, 2) and passages.summary.mean == pytest.approx(-0.2)
    assert passages.verdict().endswith("b better on 3 of 3 passages: resolved")
    with pytest.raises(ValueError, match="at least one"):
        paired_differences([], names=("a", "b"))
    with pytest.raises(ValueError, match="2 differences but 1 seeds"):
        paired_differences([0.1, 0.2], names=("a", "b"), seeds=[0])
    apart = difference_of_means([1.0, 1.1, 0.9], [2.0, 2.1, 1.9])
    assert apart.mean == pytest.approx(1.0) and apart.resolved
    assert apart.half_width == pytest.approx(4.303 * math.sqrt(2 * 0.01 / 3), rel=1e-4)
    assert t_quantile_975(0) == math.inf
    assert t_quantile_975(100) < t_quantile_975(30)  # no table: exact beyond 30 too


@pytest.mark.parametrize(
    ("level", "df", "published"),
    [  # printed tables of Student's t (two-sided), three decimals
        (0.95, 1, 12.706), (0.95, 2, 4.303), (0.95, 4, 2.776), (0.95, 9, 2.262),
        (0.95, 30, 2.042), (0.999, 1, 636.619), (0.999, 4, 8.610), (0.999, 30, 3.646),
    ],
)  # fmt: skip
def test_the_exact_t_quantile_gives_the_printed_tables(
    level: float, df: int, published: float
) -> None:
    assert t_quantile(level, df) == pytest.approx(published, abs=6e-4)


def test_the_t_quantile_for_a_family_and_for_no_degrees_of_freedom() -> None:
    # Bonferroni for eight comparisons at 4 degrees of freedom: 1 - 0.05/8 two-sided
    assert t_quantile(1 - 0.05 / 8, 4) == pytest.approx(5.26, abs=0.01)
    assert t_quantile(0.95, 0) == math.inf
    with pytest.raises(ValueError, match="level"):
        t_quantile(1.0, 4)


@given(df=st.integers(1, 40), level=st.floats(0.5, 0.999))
def test_t_quantile_grows_with_the_level_and_shrinks_with_the_df(df: int, level: float) -> None:
    assert t_quantile(level, df) < t_quantile(level + 0.0005, df)
    assert t_quantile(level, df + 1) < t_quantile(level, df)


def _t_within(t: float, df: int) -> float:
    """``P(|T| <= t)`` for Student's t with ``df`` degrees of freedom, from the closed form
    of Abramowitz and Stegun 26.7.3-4 (a finite series for integer ``df``): a reference
    that shares no code with SciPy."""
    angle = math.atan(t / math.sqrt(df))
    cos2 = math.cos(angle) ** 2
    if df % 2:  # odd: (2/pi) [angle + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...)]
        term, series = 1.0, 1.0 if df > 1 else 0.0
        for j in range(1, (df - 1) // 2):
            term *= (2 * j) / (2 * j + 1) * cos2
            series += term
        return 2 / math.pi * (angle + math.sin(angle) * math.cos(angle) * series)
    term, series = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for j in range(1, df // 2):
        term *= (2 * j - 1) / (2 * j) * cos2
        series += term
    return math.sin(angle) * series


@given(df=st.integers(1, 60), level=st.floats(0.5, 0.9999))
def test_t_quantile_leaves_level_within_by_the_closed_form(df: int, level: float) -> None:
    """Two-sided: ``P(|T| <= q) = level`` by the closed form, for every df of the course
    (a one-sided quantile, or the wrong df, misses by far more than 1e-12)."""
    assert _t_within(t_quantile(level, df), df) == pytest.approx(level, abs=1e-12)


@given(level=st.floats(0.5, 1 - 0.05 / 10_000))
def test_t_quantile_at_one_and_two_df_is_the_closed_form(level: float) -> None:
    """1 df is Cauchy, ``q = tan(pi level / 2)``; 2 df give
    ``q = level sqrt(2 / (1 - level^2))``."""
    assert t_quantile(level, 1) == pytest.approx(math.tan(math.pi * level / 2), rel=1e-9)
    assert t_quantile(level, 2) == pytest.approx(
        level * math.sqrt(2 / (1 - level * level)), rel=1e-9
    )


def test_a_family_of_comparisons_widens_the_interval_and_the_verdict_says_so() -> None:
    """Five paired differences, all negative: resolved alone at 95%, and the interval for
    a family of eight is wider (each at 99.375%)."""
    first = [RunResult("a", s, [1.0], metrics={64: Metrics(2.0, 0.5)}) for s in range(5)]
    second = [
        RunResult("b", s, [1.0], metrics={64: Metrics(2.0 - d, 0.5)})
        for s, d in enumerate([0.010, 0.012, 0.016, 0.018, 0.014])
    ]
    c = compare_paired(first, second, metric(64, "loss"))
    one, eight = c.interval(), c.interval(family=8)
    assert one[0] == pytest.approx(c.summary.mean - c.half_width, abs=1e-3)
    assert eight[0] < one[0] < one[1] < eight[1] < 0
    assert c.verdict().endswith("b better on 5 of 5 seeds: resolved")
    assert "(95% for 8 comparisons)" in c.verdict(family=8)
    tie = compare_paired(first, first, metric(64, "loss"))
    assert tie.verdict().endswith(": not resolved")
    with pytest.raises(ValueError, match="family"):
        c.interval(family=0)
    # a family wide enough loses the verdict that one comparison alone has
    assert c.resolved_for(1) and not c.resolved_for(10_000)
    assert c.verdict(family=10_000).endswith(": not resolved")
    alone = compare_paired(first[:1], second[:1], metric(64, "loss"))
    assert alone.interval() == (-math.inf, math.inf) and not alone.resolved
