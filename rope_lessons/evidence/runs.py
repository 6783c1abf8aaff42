"""Toy runs: a run fixes everything but the seed; train it, evaluate it, repeat over seeds.

A :class:`Run` holds the model configuration, the data (a synthetic task of
:mod:`rope_lessons.toy.synthetic` or a :class:`~rope_lessons.toy.corpus.CharCorpus`),
the training length and budget, and the lengths to evaluate at (longer than
the training length to test extrapolation). :func:`make_run` builds one for
any task or corpus; :func:`train_run` trains it with one seed, evaluates it on
held-out data (:func:`held_out`: the validation split; for a corpus, the end of
the text that training never sees; for a synthetic task, a separate stream,
the same for every seed and variant) and hands back the trained model with
the result (:func:`run_once`: the result alone). :func:`run_seeds` repeats it
over seeds; :func:`metric` reads one number of a result. Summaries and paired
comparisons over seeds are :mod:`rope_lessons.evidence.comparisons`.

The chapter-2 task, reused by chapter 3, is :func:`order_run`: the
:class:`~rope_lessons.toy.synthetic.WhichFirst` task on a bidirectional model,
trained at length 16 and evaluated at 16, 32 and 64.

Multi-seed experiments too slow for a notebook are stored sweeps of runs:
see :mod:`rope_lessons.evidence.store` and :mod:`rope_lessons.sweeps`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import torch
from torch import nn

from rope_lessons._checks import check_choice, check_positive_int
from rope_lessons.evidence.runtime import check_device, seed_everything
from rope_lessons.evidence.training import Metrics, evaluate, train
from rope_lessons.toy.corpus import CharCorpus
from rope_lessons.toy.model import ModelConfig, PositionKind, TinyTransformer
from rope_lessons.toy.synthetic import (
    VALIDATION_SEED_OFFSET,
    Batch,
    Task,
    WhichFirst,
    batch_sampler,
)

# The validation stream of length n is seeded with EVAL_SEED_OFFSET + n (batch_sampler's
# split="val" with seed=n); training seeds stay below it, so the streams never meet.
EVAL_SEED_OFFSET = VALIDATION_SEED_OFFSET
EVAL_BATCH_SIZE = 256
# Every run is evaluated on held-out data at every evaluation length after PREFIX_STEPS
# steps and at CHECKPOINTS evenly spaced points (the last is the end of training).
# The first PREFIX_STEPS steps are where CPUs with different vector instruction sets
# still agree to about 1e-6 (training then amplifies the rounding): a stored run's
# prefix is what a re-run on any machine must match closely (rope_lessons.evidence.store).
PREFIX_STEPS = 25
CHECKPOINTS = 5
METRIC_NAMES = tuple(f.name for f in dataclasses.fields(Metrics))

ModelT = TypeVar("ModelT", bound=nn.Module, covariant=True)
BuiltT = TypeVar("BuiltT", bound=nn.Module)


class ModelRecipe(Protocol[ModelT]):
    """What a :class:`Run` trains: a frozen configuration that builds a fresh model
    (tokens ``(B, T)`` -> logits ``(B, T, V)``) and describes itself in JSON-ready
    values. :class:`~rope_lessons.toy.model.ModelConfig` builds a
    :class:`~rope_lessons.toy.model.TinyTransformer`,
    :class:`~rope_lessons.chapters.recurrent_models.RecurrentConfig` a recurrent model."""

    @property
    def vocab_size(self) -> int: ...

    def build(self) -> ModelT: ...

    def describe(self) -> dict[str, Any]: ...


Analyse = Callable[[BuiltT, "Run[BuiltT]", torch.device], dict[str, float]]


@dataclass(frozen=True)
class Run(Generic[BuiltT]):
    """One trainable configuration; the seed is chosen when it is run.

    Attributes:
        label: names the variant in tables, legends and stored sweeps (e.g.
            ``"rope, placement=vo"``); unique within a sweep.
        model: the model's recipe, a :class:`ModelRecipe` such as
            :class:`~rope_lessons.toy.model.ModelConfig` (its vocabulary must cover
            the data's); every seed builds a fresh model from it.
        data: a synthetic task or a :class:`~rope_lessons.toy.corpus.CharCorpus`.
        train_len: sequence length during training.
        eval_lens: sequence lengths to evaluate at, on held-out data.
        steps, batch_size, lr: the training budget.
        eval_batches: batches of 256 held-out sequences per evaluation (at
            every checkpoint, see :attr:`checkpoint_steps`).
        analyse: a module-level function ``(model, run, device) -> dict[str,
            float]`` called on the trained model; its numbers are kept in the
            result's ``extra`` (weights are not stored, so anything a stored
            sweep needs from a trained model goes through it).
        n_checkpoints: how many evenly spaced evaluations (see
            :attr:`checkpoint_steps`); more of them time a learning curve more
            finely (e.g. the step at which a task is solved). The default,
            :data:`CHECKPOINTS`, is what every earlier sweep was stored with.
    """

    label: str
    model: ModelRecipe[BuiltT]
    data: Task
    train_len: int
    eval_lens: tuple[int, ...]
    steps: int
    batch_size: int = 32
    lr: float = 3e-3
    eval_batches: int = 4
    analyse: Analyse[BuiltT] | None = None
    n_checkpoints: int = CHECKPOINTS

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError(
                f"label must be a non-empty string naming the variant, got {self.label!r}"
            )
        if not all(
            callable(getattr(self.model, name, None)) for name in ("build", "describe")
        ) or not isinstance(getattr(self.model, "vocab_size", None), int):
            raise TypeError(
                "model must be a recipe with vocab_size, build() and describe() (a ModelConfig "
                f"or a RecurrentConfig), got {type(self.model).__name__}"
            )
        for name in ("train_len", "steps", "batch_size", "eval_batches", "n_checkpoints"):
            check_positive_int(getattr(self, name), name)
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {self.lr!r}")
        if not isinstance(self.eval_lens, tuple) or not self.eval_lens:
            raise TypeError(f"eval_lens must be a non-empty tuple of ints, got {self.eval_lens!r}")
        for length in self.eval_lens:
            check_positive_int(length, "eval_lens")
        for length in (self.train_len, *self.eval_lens):
            if length < self.data.min_len:
                raise ValueError(
                    f"sequence length {length} is shorter than the data's minimum "
                    f"{self.data.min_len} (train_len={self.train_len}, eval_lens={self.eval_lens})"
                )
        if self.model.vocab_size < self.data.vocab_size:
            raise ValueError(
                f"the model's vocab_size={self.model.vocab_size} is smaller than the data's "
                f"vocabulary ({self.data.vocab_size} token ids): tokens would be out of range"
            )
        rows = self._learned_rows()
        if rows is not None and self.train_len > rows:
            raise ValueError(
                f"train_len={self.train_len} exceeds the learned table's max_len={rows}"
            )
        if self.analyse is not None and "<" in getattr(self.analyse, "__qualname__", "<"):
            raise ValueError(
                "analyse must be a module-level function (not a lambda or a nested function), "
                "so that a stored sweep can name it"
            )

    def describe(self) -> dict[str, Any]:
        """Everything that defines the run, as JSON-ready values (stored with sweep results)."""
        analyse = None
        if self.analyse is not None:
            analyse = f"{self.analyse.__module__}.{self.analyse.__qualname__}"
        return {
            "label": self.label,
            "model": self.model.describe(),
            "data": describe_data(self.data),
            "train_len": self.train_len,
            "eval_lens": list(self.eval_lens),
            "steps": self.steps,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "eval_batches": self.eval_batches,
            "checkpoints": list(self.checkpoint_steps),
            "analyse": analyse,
        }

    def _learned_rows(self) -> int | None:
        """The rows of a learned position table, beyond which the model cannot read."""
        model = self.model
        if isinstance(model, ModelConfig) and model.position == "learned":
            return model.max_len
        return None

    def readable_lengths(self) -> tuple[int, ...]:
        """The evaluation lengths the model can read (a learned table stops at its rows)."""
        rows = self._learned_rows()
        return tuple(n for n in self.eval_lens if rows is None or n <= rows)

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        """Steps after which held-out data is evaluated at every length: the end of the
        deterministic prefix (:data:`PREFIX_STEPS`) and :attr:`n_checkpoints` evenly
        spaced points, the last of them the end of training; with more than
        :data:`CHECKPOINTS` of them, also the start of the last fifth of training
        (what a convergence check compares the end with)."""
        n = self.n_checkpoints
        even = {math.ceil(self.steps * i / n) for i in range(1, n + 1)}
        if n != CHECKPOINTS:
            even.add(checkpoint_step(self.steps, CHECKPOINTS - 1))
        return tuple(sorted(even | {min(PREFIX_STEPS, self.steps)}))

    def metric(self, length: int, name: str | None = None) -> Metric:
        """:func:`metric` for this run's data: by default loss for a corpus, accuracy for a task."""
        return metric(length, name, data=self.data)

    @property
    def cost(self) -> int:
        """Tokens processed in training and evaluation: a machine-independent size."""
        evaluated = sum(self.eval_lens) * EVAL_BATCH_SIZE * self.eval_batches
        return 3 * self.steps * self.batch_size * self.train_len + evaluated * len(
            self.checkpoint_steps
        )


def checkpoint_step(steps: int, i: int) -> int:
    """The ``i``-th of the :data:`CHECKPOINTS` evenly spaced checkpoints of a ``steps``-step
    run (``i = CHECKPOINTS`` is the end of training)."""
    return math.ceil(steps * i / CHECKPOINTS)


def describe_data(data: object) -> dict[str, Any]:
    """The data's type and fields; a field left out of its repr (a corpus text) by its SHA-256."""
    description: dict[str, Any] = {"type": f"{type(data).__module__}.{type(data).__qualname__}"}
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        for f in dataclasses.fields(data):
            value = getattr(data, f.name)
            if f.repr:
                description[f.name] = value
            else:
                description[f.name] = "sha256:" + hashlib.sha256(str(value).encode()).hexdigest()
    else:
        description["repr"] = repr(data)
    return description


def answer_set(data: object) -> tuple[int, ...] | None:
    """The data's fixed answer set (e.g. WhichFirst's ``(A, B)``), or None if it has none."""
    answers = getattr(data, "answers", None)
    return None if answers is None else tuple(int(a) for a in answers)


def make_run(
    label: str,
    data: Task,
    *,
    train_len: int,
    eval_lens: Sequence[int],
    steps: int,
    batch_size: int = 32,
    lr: float = 3e-3,
    eval_batches: int = 4,
    analyse: Analyse[TinyTransformer] | None = None,
    **model_fields: Any,
) -> Run[TinyTransformer]:
    """A :class:`Run` for any task or corpus; ``model_fields`` are fields of
    :class:`~rope_lessons.toy.model.ModelConfig` (``vocab_size`` defaults to the data's).

    Example::

        make_run("nope", CharCorpus(), train_len=64, eval_lens=(64, 128), steps=200,
                 position="none", n_layers=2)
    """
    model_fields.setdefault("vocab_size", data.vocab_size)
    return Run(
        label=label,
        model=ModelConfig(**model_fields),
        data=data,
        train_len=train_len,
        eval_lens=tuple(eval_lens),
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        eval_batches=eval_batches,
        analyse=analyse,
    )


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run with one seed.

    Attributes:
        label, seed: which run.
        losses: training loss at every step trained.
        metrics: held-out metrics at each evaluation length after the last
            step trained; a length the model cannot encode (beyond a learned
            table) is missing.
        checkpoints: held-out metrics keyed by steps done, then by length, at
            every checkpoint reached (:attr:`Run.checkpoint_steps`).
        extra: the numbers returned by the run's ``analyse`` function.
        wall_seconds: training time.
    """

    label: str
    seed: int
    losses: list[float]
    metrics: dict[int, Metrics] = field(default_factory=dict)
    checkpoints: dict[int, dict[int, Metrics]] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready values (integer keys become strings)."""
        return {
            "label": self.label,
            "seed": self.seed,
            "losses": self.losses,
            "metrics": {str(n): dataclasses.asdict(m) for n, m in self.metrics.items()},
            "checkpoints": {
                str(step): {str(n): dataclasses.asdict(m) for n, m in table.items()}
                for step, table in self.checkpoints.items()
            },
            "extra": self.extra,
            "wall_seconds": self.wall_seconds,
        }

    @property
    def evaluations(self) -> dict[int, dict[int, Metrics]]:
        """Held-out metrics by steps done: every checkpoint reached and the end of training
        (a run trained without checkpoints has only the end)."""
        return dict(sorted({**self.checkpoints, len(self.losses): self.metrics}.items()))

    @classmethod
    def from_json(cls, values: dict[str, Any]) -> RunResult:
        """The inverse of :meth:`to_json`."""
        return cls(
            label=values["label"],
            seed=values["seed"],
            losses=list(values["losses"]),
            metrics={int(n): Metrics(**m) for n, m in values["metrics"].items()},
            checkpoints={
                int(step): {int(n): Metrics(**m) for n, m in table.items()}
                for step, table in values["checkpoints"].items()
            },
            extra=dict(values["extra"]),
            wall_seconds=values["wall_seconds"],
        )


def train_run(
    run: Run[BuiltT],
    seed: int,
    device: torch.device | str = "cpu",
    progress: bool = True,
    stop_after: int | None = None,
    checkpoints: bool = True,
) -> tuple[BuiltT, RunResult]:
    """Train ``run`` from scratch with ``seed``, evaluate it on held-out data at every
    length, and hand back the trained model with the result.

    Held-out data is the validation split (:func:`~rope_lessons.toy.synthetic.batch_sampler`
    with ``split="val"``), at each length the same batches for every seed and
    variant, evaluated at every checkpoint (:attr:`Run.checkpoint_steps`) and
    after the last step. Tasks with a fixed answer set also get
    ``answer_accuracy`` and ``neither`` (see :class:`~rope_lessons.evidence.training.Metrics`).

    Args:
        run: what to train.
        seed: in ``[0, EVAL_SEED_OFFSET)``; seeds the weights and the training stream.
        device: where to train (``"cpu"``, ``"cuda"``, ...); CUDA must be available.
        progress: show a progress bar on standard error.
        stop_after: train only the first this many of the run's steps (same
            learning-rate schedule): a live re-run that a notebook can afford,
            comparable with the stored run's curve and checkpoints up to there.
            The ``analyse`` hook runs on whatever was trained.
        checkpoints: evaluate at the checkpoints (False: only after the last
            step; a result to read, not one to check against stored runs,
            which compares the evaluation after the prefix and later ones).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < EVAL_SEED_OFFSET:
        raise ValueError(f"seed must be an int in [0, {EVAL_SEED_OFFSET}), got {seed!r}")
    device = check_device(device)
    answers = answer_set(run.data)
    seed_everything(seed)
    model = run.model.build().to(device)
    lengths = run.readable_lengths()

    def evaluate_all() -> dict[int, Metrics]:
        return {
            length: evaluate(
                model,
                held_out(run.data, length, device=device),
                batches=run.eval_batches,
                answers=answers,
            )
            for length in lengths
        }

    evaluations: dict[int, dict[int, Metrics]] = {}

    def at_checkpoint(done: int) -> None:
        evaluations[done] = evaluate_all()

    result = train(
        model,
        batch_sampler(run.data, run.batch_size, run.train_len, seed=seed, device=device),
        steps=run.steps,
        lr=run.lr,
        progress=progress,
        desc=f"{run.label}, seed {seed}",
        stop_after=stop_after,
        checkpoints=run.checkpoint_steps if checkpoints else (),
        on_checkpoint=at_checkpoint if checkpoints else None,
    )
    trained = len(result.losses)
    metrics = evaluations[trained] if trained in evaluations else evaluate_all()
    extra = {} if run.analyse is None else run.analyse(model, run, device)
    return model, RunResult(
        label=run.label,
        seed=seed,
        losses=result.losses,
        metrics=metrics,
        checkpoints=evaluations,
        extra={str(key): float(value) for key, value in extra.items()},
        wall_seconds=result.wall_seconds,
    )


def run_once(
    run: Run[Any],
    seed: int,
    device: torch.device | str = "cpu",
    progress: bool = True,
    stop_after: int | None = None,
    checkpoints: bool = True,
) -> RunResult:
    """:func:`train_run` without the model: what a sweep stores."""
    return train_run(run, seed, device, progress, stop_after, checkpoints)[1]


def held_out(
    data: Task,
    length: int,
    batch_size: int = EVAL_BATCH_SIZE,
    device: torch.device | str = "cpu",
) -> Callable[[], Batch]:
    """The validation sampler of ``data`` at ``length``: the same batches for every seed,
    run and variant (the validation split, seeded by the length)."""
    return batch_sampler(data, batch_size, length, seed=length, split="val", device=device)


def run_seeds(
    run: Run[Any],
    seeds: Sequence[int],
    device: torch.device | str = "cpu",
    progress: bool = True,
    checkpoints: bool = True,
) -> list[RunResult]:
    """:func:`run_once` for every seed."""
    return [run_once(run, seed, device, progress, checkpoints=checkpoints) for seed in seeds]


# Which way each held-out metric improves: loss and "neither" (answers missed
# altogether) fall, accuracies rise.
LOWER_IS_BETTER = {"loss": True, "accuracy": False, "answer_accuracy": False, "neither": True}


def default_metric(data: object) -> str:
    """The metric a comparison reads when none is named: ``"loss"`` for a corpus (a
    language model's next-character accuracy says little), ``"accuracy"`` for a task."""
    return "loss" if isinstance(data, CharCorpus) else "accuracy"


@dataclass(frozen=True)
class Metric:
    """One held-out metric at one length, read from a result: ``metric(64, "loss")(result)``.

    Attributes:
        length: the evaluation length.
        name: a field of :class:`~rope_lessons.evidence.training.Metrics`.
    """

    length: int
    name: str

    def __post_init__(self) -> None:
        check_choice(self.name, "name", METRIC_NAMES)

    @property
    def lower_is_better(self) -> bool:
        """True for loss and ``neither``, False for the accuracies."""
        return LOWER_IS_BETTER[self.name]

    def __call__(self, result: RunResult) -> float:
        if self.length not in result.metrics:
            raise ValueError(
                f"{result.label!r} seed {result.seed} was not evaluated at {self.length}"
            )
        number = getattr(result.metrics[self.length], self.name)
        if number is None:
            raise ValueError(f"{result.label!r} has no {self.name!r} (its task has no answer set)")
        return float(number)

    def __str__(self) -> str:
        return f"{self.name} at length {self.length}"


def metric(length: int, name: str | None = None, *, data: object = None) -> Metric:
    """A function reading one held-out metric of a result, e.g. ``metric(64, "loss")``.

    Args:
        length: the evaluation length.
        name: a field of :class:`~rope_lessons.evidence.training.Metrics`; by default
            :func:`default_metric` of ``data``: loss for a corpus, accuracy for
            a task (and accuracy when ``data`` is not given either, so name
            the metric or pass the data; :meth:`Run.metric` passes its own).
        data: the run's data, which picks the default metric.
    """
    return Metric(length, default_metric(data) if name is None else name)


def steps_to_reach(
    result: RunResult, length: int, threshold: float, name: str = "accuracy"
) -> int | None:
    """The first evaluation (steps done) at which a held-out metric at ``length`` reaches
    ``threshold`` (``>=``; ``<=`` for loss and ``neither``), or None if none does.

    Only the evaluations a run made are looked at (:attr:`RunResult.evaluations`: its
    checkpoints and the end), so the answer is known to the spacing of its checkpoints:
    a run reaching the threshold between two of them is counted at the later one.
    """
    lower = LOWER_IS_BETTER[check_choice(name, "name", METRIC_NAMES)]
    for steps, table in result.evaluations.items():
        if length not in table:
            continue
        value = getattr(table[length], name)
        if value is None:
            raise ValueError(f"{result.label!r} has no {name!r} (its task has no answer set)")
        if (value <= threshold) if lower else (value >= threshold):
            return steps
    return None


def order_run(
    position: PositionKind,
    *,
    causal: bool = False,
    steps: int = 300,
    batch_size: int = 32,
    label: str | None = None,
    **model_fields: Any,
) -> Run[TinyTransformer]:
    """The chapter-2 order task for one position encoding.

    :class:`~rope_lessons.toy.synthetic.WhichFirst` with 8 filler tokens, a two-layer
    model of width 64 with 4 heads, bidirectional unless ``causal``; trained at
    length 16 and evaluated at 16, 32 and 64. ``model_fields`` override fields
    of :class:`~rope_lessons.toy.model.ModelConfig` (e.g. ``placement="vo"``). The
    default label names the variant: ``"rope, causal, placement=vo"``.
    """
    if label is None:
        overrides = [f"{name}={value}" for name, value in model_fields.items()]
        label = ", ".join([position, *(["causal"] if causal else []), *overrides])
    fields: dict[str, Any] = {
        "dim": 64,
        "n_layers": 2,
        "n_heads": 4,
        "max_len": 16,
        **model_fields,
    }
    return make_run(
        label,
        WhichFirst(n_fillers=8),
        train_len=16,
        eval_lens=(16, 32, 64),
        steps=steps,
        batch_size=batch_size,
        causal=causal,
        position=position,
        **fields,
    )
