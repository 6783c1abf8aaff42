r"""SmolLM2-135M past its 8192-token context: per-position losses and passkey retrieval.

Chapter 9's last section reads the real model of :mod:`rope_lessons.real.pretrained`
beyond the length it was trained on, with chapter 8's extension specs
(:func:`rope_lessons.rope.scaled_specs.scaled_frequencies`, swapped in by
:meth:`~rope_lessons.real.pretrained.Pretrained.rotating`) and with a sliding window:

* :func:`window_mask`: which keys each query may see in a sliding window of
  ``window`` tokens, optionally with the first ``sinks`` tokens always
  visible (Xiao et al.'s "attention sinks");
* :func:`position_losses`: the next-token loss at every position of a long
  sequence from one forward pass, the vocabulary projection taken in chunks so
  that no ``(T, vocabulary)`` logits tensor is ever whole;
* :func:`binned`: those losses averaged over consecutive bins of positions;
* :func:`passkey_prompt` and :func:`passkey_score`: Mohtashami and Jaggi's
  passkey test: a five-digit number hidden at a chosen depth of repeated
  filler text, asked for at the end, scored by teacher forcing (is every
  token of the answer the model's top prediction, and the answer's
  log-probability).

Shapes: ``T`` tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rope_lessons._checks import check_positive_int
from rope_lessons.real.pretrained import Pretrained
from rope_lessons.toy.rotary_attention import Local

PASSKEY_INTRO = (
    "There is an important piece of information hidden inside a lot of irrelevant text. "
    "Find it and remember it. I will ask you about it at the end."
)
PASSKEY_FILLER = (
    " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
)
PASSKEY_NEEDLE = " The pass key is {key}. Remember it. {key} is the pass key."
PASSKEY_QUESTION = " What is the pass key? The pass key is"


def window_mask(length: int, window: int, sinks: int = 0) -> torch.Tensor:
    """Which keys each query attends to under a causal sliding window.

    Query ``i`` sees key ``j`` when ``i - window < j <= i`` (the ``window``
    latest tokens, itself included), and also when ``j < sinks``.

    Returns:
        bool ``(T, T)``, True where query (row) ``i`` may attend to key (column) ``j``.
    """
    length = check_positive_int(length, "length")
    window = check_positive_int(window, "window")
    if not isinstance(sinks, int) or isinstance(sinks, bool) or sinks < 0:
        raise ValueError(f"sinks must be a non-negative int, got {sinks!r}")
    queries, keys = torch.arange(length)[:, None], torch.arange(length)[None, :]  # (T, 1), (1, T)
    return (keys <= queries) & (Local(window).allows(queries, keys) | (keys < sinks))


def _check_ids(token_ids: torch.Tensor) -> torch.Tensor:
    if (
        not isinstance(token_ids, torch.Tensor)
        or token_ids.ndim != 1
        or token_ids.is_floating_point()
        or len(token_ids) < 2
    ):
        raise TypeError("token_ids must be an integer tensor of shape (T,), T >= 2")
    return token_ids


def _final_hidden(
    smol: Pretrained, token_ids: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """The last layer's normalised hidden states ``(T, C)`` of one pass over ``token_ids``
    ``(T,)``, under ``mask`` (bool ``(T, T)``) or the plain causal mask, on the model's device."""
    device = smol.model.lm_head.weight.device
    extra = {}
    if mask is not None:
        if mask.dtype != torch.bool or mask.shape != (len(token_ids), len(token_ids)):
            raise ValueError(f"mask must be bool of shape {(len(token_ids),) * 2}")
        # An additive float mask means the same to every attention implementation;
        # a bool one is read as allowed/forbidden only by SDPA (eager would add it).
        dtype = smol.model.lm_head.weight.dtype
        additive = torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
        extra["attention_mask"] = additive.to(device)[None, None]  # (1, 1, T, T)
    ids = token_ids.to(device)[None]  # (1, T)
    hidden: torch.Tensor = smol.model.model(
        input_ids=ids, use_cache=False, **extra
    ).last_hidden_state
    return hidden[0]


@torch.no_grad()
def position_losses(
    smol: Pretrained,
    token_ids: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    chunk: int = 2048,
) -> torch.Tensor:
    """Next-token cross-entropy at every position, from one forward pass of any length.

    Unlike :meth:`~rope_lessons.real.pretrained.Pretrained.loss`, the length is not
    held to the trained context: this is the measurement of reading past it.
    The final hidden states are projected onto the vocabulary ``chunk``
    positions at a time.

    Args:
        smol: the loaded model (rotating with whatever spec is in force).
        token_ids: long ``(T,)``, on any device (moved to the model's).
        mask: optional bool ``(T, T)`` (e.g. :func:`window_mask`), True where a
            query may attend to a key; None is the plain causal mask.
        chunk: positions per vocabulary projection.

    Returns:
        float32 ``(T - 1,)`` on the CPU: entry ``t`` is the loss of token ``t + 1``
        given tokens ``0 .. t``.
    """
    token_ids = _check_ids(token_ids)
    chunk = check_positive_int(chunk, "chunk")
    hidden = _final_hidden(smol, token_ids, mask)  # (T, C)
    targets = token_ids.to(hidden.device)
    losses = []
    for start in range(0, len(token_ids) - 1, chunk):
        stop = min(start + chunk, len(token_ids) - 1)
        logits = smol.model.lm_head(hidden[start:stop]).float()  # (chunk, V)
        losses.append(F.cross_entropy(logits, targets[start + 1 : stop + 1], reduction="none"))
    return torch.cat(losses).cpu()


def binned(values: torch.Tensor, width: int) -> list[float]:
    """Means of ``values`` ``(N,)`` over consecutive bins of ``width`` (the last may be short)."""
    width = check_positive_int(width, "width")
    return [float(part.mean()) for part in values.split(width)]


@dataclass(frozen=True)
class PasskeyPrompt:
    """A passkey trial: the prompt with its answer appended, and where the answer is.

    Attributes:
        token_ids: long ``(T,)``: the prompt, then the answer's tokens.
        answer_start: index of the answer's first token in ``token_ids``.
        key: the five-digit number hidden in the filler.
        needle_position: index of the needle's first token.
    """

    token_ids: torch.Tensor
    answer_start: int
    key: int
    needle_position: int

    @property
    def distance(self) -> int:
        """Tokens from the needle to the first answer token."""
        return self.answer_start - self.needle_position


def passkey_key(seed: int) -> int:
    """A five-digit key drawn from its own generator (the trials' keys repeat across runs)."""
    return random.Random(seed).randrange(10_000, 100_000)


def passkey_prompt(smol: Pretrained, length: int, depth: float, key: int) -> PasskeyPrompt:
    """A passkey prompt of at most ``length`` tokens, answer included.

    Introduction, filler repeated, the needle after a fraction ``depth`` of the
    filler, more filler, the question, and the answer `` {key}``. The filler
    comes in whole repetitions, so the prompt is up to one repetition (about 25
    tokens) shorter than ``length``.
    """
    length = check_positive_int(length, "length")
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth}")
    if not 10_000 <= key < 100_000:
        raise ValueError(f"key must have five digits, got {key}")
    intro, filler = smol.encode(PASSKEY_INTRO), smol.encode(PASSKEY_FILLER)
    needle = smol.encode(PASSKEY_NEEDLE.format(key=key))
    question, answer = smol.encode(PASSKEY_QUESTION), smol.encode(f" {key}")
    fixed = len(intro) + len(needle) + len(question) + len(answer)
    repeats = (length - fixed) // len(filler)
    if repeats < 1:
        raise ValueError(f"length {length} is too short for a passkey prompt ({fixed} tokens)")
    before = round(depth * repeats)
    parts = [intro, filler.repeat(before), needle, filler.repeat(repeats - before), question]
    prompt = torch.cat(parts)
    return PasskeyPrompt(
        token_ids=torch.cat([prompt, answer]),
        answer_start=len(prompt),
        key=key,
        needle_position=len(intro) + before * len(filler),
    )


@dataclass(frozen=True)
class PasskeyScore:
    """How the model answered one passkey trial (teacher-forced).

    Attributes:
        retrieved: every answer token was the model's top prediction.
        tokens_right: how many of the answer's tokens were.
        answer_tokens: the answer's length in tokens.
        log_prob: the answer's total log-probability (nats).
    """

    retrieved: bool
    tokens_right: int
    answer_tokens: int
    log_prob: float


@torch.no_grad()
def passkey_score(
    smol: Pretrained, prompt: PasskeyPrompt, mask: torch.Tensor | None = None
) -> PasskeyScore:
    """Teacher-forced answer of one trial: one forward pass over prompt and answer."""
    hidden = _final_hidden(smol, prompt.token_ids, mask)  # (T, C)
    answer = prompt.token_ids[prompt.answer_start :].to(hidden.device)  # (A,)
    logits = smol.model.lm_head(hidden[prompt.answer_start - 1 : -1]).float()  # (A, V)
    log_probs = logits.log_softmax(-1).gather(-1, answer[:, None]).squeeze(-1)
    right = int((logits.argmax(-1) == answer).sum())
    return PasskeyScore(
        retrieved=right == len(answer),
        tokens_right=right,
        answer_tokens=len(answer),
        log_prob=float(log_probs.sum()),
    )
