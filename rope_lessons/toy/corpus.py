"""A character-level corpus that ships with the package: Melville's *Moby-Dick*.

The text lives in ``rope_lessons/data/moby_dick.txt.xz`` (public domain; see
``PROVENANCE.md`` beside it). Loading checks its SHA-256, so every machine
trains on the same bytes and no download ever happens.
"""

from __future__ import annotations

import hashlib
import lzma
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

import torch

from rope_lessons._checks import check_choice, check_positive_int
from rope_lessons.toy.synthetic import SPLITS, Batch, Split

CORPUS_SHA256 = "6eddb555305eba56f60e638e8aac85dd4e846326bf33f7b485a06ad7e169d423"


@cache
def load_text() -> str:
    """The whole corpus as one string (1,191,295 characters)."""
    packed = resources.files("rope_lessons").joinpath("data/moby_dick.txt.xz").read_bytes()
    raw = lzma.decompress(packed)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != CORPUS_SHA256:
        raise RuntimeError(
            f"corpus checksum mismatch: expected {CORPUS_SHA256}, got {digest}; "
            "the data file was modified"
        )
    return raw.decode("utf-8")


# A window of the shortest length (min_len = 1 character) needs the character after it as its
# target: each split must hold at least this many characters for batch_sampler to draw one.
MIN_SPLIT_CHARS = 2


@dataclass
class CharCorpus:
    """Characters mapped to ids, split into a training and a validation part.

    Attributes:
        text: the text to model itself (not a file name: see
            :meth:`from_file`); defaults to the shipped corpus.
        val_fraction: the last part of the text held out for validation.

    Raises:
        ValueError: if the text is too short: the training part (the first
            ``int(len(text) * (1 - val_fraction))`` characters) and the
            validation part (the rest) must each hold at least
            :data:`MIN_SPLIT_CHARS` = 2 characters, one window of the shortest
            length (1) and the character after it, its target; fewer, and
            :func:`~rope_lessons.toy.synthetic.batch_sampler` could not draw a
            single batch of that split. Longer windows need longer splits
            (:meth:`sample` refuses a window that does not fit).
    """

    text: str = field(default_factory=load_text, repr=False)
    val_fraction: float = 0.1

    # A corpus follows the Task protocol of rope_lessons.toy.synthetic: batch_sampler works.
    min_len = 1

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], val_fraction: float = 0.1, encoding: str = "utf-8"
    ) -> CharCorpus:
        """The corpus of a text file's content (``CharCorpus(text)`` takes the text itself)."""
        return cls(Path(path).read_text(encoding=encoding), val_fraction)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"text must be a str, got {type(self.text).__name__}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must lie in (0, 1), got {self.val_fraction}")
        length = len(self.text)
        cut = int(length * (1.0 - self.val_fraction))
        if min(cut, length - cut) < MIN_SPLIT_CHARS:
            raise ValueError(
                f"text of {length} characters is too short: with val_fraction="
                f"{self.val_fraction} it splits into {cut} training and {length - cut} "
                f"validation characters, and each split needs at least {MIN_SPLIT_CHARS} "
                "(a window of one character and the character after it, its target); "
                "to read a file, use CharCorpus.from_file(path)"
            )
        self.alphabet = sorted(set(self.text))
        self._index = {ch: i for i, ch in enumerate(self.alphabet)}
        ids = self.encode(self.text)
        self.splits = {"train": ids[:cut], "val": ids[cut:]}

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters."""
        return len(self.alphabet)

    def encode(self, text: str) -> torch.Tensor:
        """Character ids of ``text``, a long tensor ``(len(text),)``."""
        try:
            return torch.tensor([self._index[ch] for ch in text], dtype=torch.long)
        except KeyError as missing:
            raise ValueError(f"character {missing} is not in the corpus alphabet") from None

    def decode(self, ids: torch.Tensor | Sequence[int]) -> str:
        """The text of a 1-D tensor or a sequence of ids."""
        values = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        if any(isinstance(i, list) for i in values):
            raise ValueError("ids must be one-dimensional: decode one sequence at a time")
        for i in values:
            if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.alphabet):
                raise ValueError(f"ids must be ints in [0, {len(self.alphabet)}), got {i!r}")
        return "".join(self.alphabet[i] for i in values)

    def sample(
        self, batch_size: int, seq_len: int, generator: torch.Generator, split: Split = "train"
    ) -> Batch:
        """Random windows for next-character prediction.

        Returns:
            ``(tokens, targets)``, each ``(batch_size, seq_len)``, where
            ``targets[:, t] = tokens[:, t + 1]`` in the text.
        """
        check_positive_int(batch_size, "batch_size")
        check_positive_int(seq_len, "seq_len")
        ids = self.splits[check_choice(split, "split", SPLITS)]
        if seq_len + 1 > len(ids):
            raise ValueError(f"seq_len={seq_len} is longer than the {split} split")
        starts = torch.randint(0, len(ids) - seq_len, (batch_size,), generator=generator)
        windows = torch.stack([ids[s : s + seq_len + 1] for s in starts.tolist()])
        return windows[:, :-1], windows[:, 1:]
