r"""Chapter 7's small sequence models with real and complex decays, and what they predict.

Three mixers, each a linear recurrence of :mod:`rope_lessons.chapters.recurrence`:

* ``"real"``: a diagonal linear recurrence with real decays in ``(0, 1)``;
* ``"complex"``: the LRU of Orvieto et al. 2023 (arXiv:2303.06349): complex
  decays :math:`\lambda = \exp(-e^{\nu} + i e^{\phi})` initialised on a ring,
  inputs scaled by :math:`\sqrt{1 - |\lambda|^2}`;
* ``"retnet"``: retention (Sun et al. 2023, arXiv:2307.08621): a real decay
  :math:`\gamma_h` per head and RoPE on queries and keys, no softmax.

They train like every model of the course: a
:class:`~rope_lessons.evidence.runs.Run` whose model is a :class:`RecurrentConfig`,
through :func:`~rope_lessons.evidence.runs.train_run`. :func:`prediction_lags`
reads what a trained model predicts.

Shapes: ``...`` any leading dimensions, ``T`` sequence length, ``n`` channels
of the recurrence, ``B`` batch, ``H`` heads, ``D`` head dimension, ``C`` model
width, ``V`` vocabulary.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch
from torch import nn

from rope_lessons._checks import (
    check_base,
    check_choice,
    check_positive_int,
    check_positive_number,
)
from rope_lessons.chapters.recurrence import (
    decay_powers,
    linear_recurrence,
    linear_recurrence_parallel,
    retnet_decays,
)
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.rotary_attention import rotate_inputs

MixerKind = Literal["real", "complex", "retnet"]
MIXER_KINDS: tuple[MixerKind, ...] = get_args(MixerKind)
Form = Literal["parallel", "recurrent"]
FORMS: tuple[Form, ...] = get_args(Form)


@dataclass(frozen=True)
class RecurrentConfig:
    """Everything that defines a :class:`RecurrentModel`.

    Attributes:
        vocab_size: ``V``.
        mixer: ``"real"``, ``"complex"`` or ``"retnet"`` (see the module docstring).
        dim: model width ``C``.
        state: complex channels ``N`` of the ``"complex"`` mixer; the
            ``"real"`` mixer gets ``2N`` real channels, so that both keep
            ``2N`` real numbers per token and have the same input and output
            matrices' sizes.
        n_heads: heads of the ``"retnet"`` mixer (``C / n_heads`` even).
        n_layers: blocks.
        r_min, r_max: the ring of initial decay moduli, as in LRU.
        max_phase: initial phases of the complex decays drawn from
            ``U[0, max_phase]`` (LRU: ``2 pi``).
        rope_base: RoPE's base in the ``"retnet"`` mixer.
        form: ``"parallel"`` (training) or ``"recurrent"`` (step by step).
    """

    vocab_size: int
    mixer: MixerKind = "complex"
    dim: int = 64
    state: int = 32
    n_heads: int = 4
    n_layers: int = 1
    mlp_ratio: int = 4
    r_min: float = 0.9
    r_max: float = 0.999
    max_phase: float = 2 * math.pi
    rope_base: float = 10000.0
    form: Form = "parallel"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "dim", "state", "n_heads", "n_layers", "mlp_ratio"):
            check_positive_int(getattr(self, name), name)
        check_choice(self.mixer, "mixer", MIXER_KINDS)
        check_choice(self.form, "form", FORMS)
        if not 0 < self.r_min <= self.r_max < 1:
            raise ValueError(
                f"need 0 < r_min <= r_max < 1, got r_min={self.r_min}, r_max={self.r_max}"
            )
        check_positive_number(self.max_phase, "max_phase")
        check_base(self.rope_base)
        if self.dim % self.n_heads or (self.dim // self.n_heads) % 2:
            raise ValueError(
                f"dim / n_heads must be an even integer, got dim={self.dim}, n_heads={self.n_heads}"
            )

    def build(self) -> RecurrentModel:
        """A freshly initialised :class:`RecurrentModel`: what a
        :class:`~rope_lessons.evidence.runs.Run` with this config trains."""
        return RecurrentModel(self)

    def describe(self) -> dict[str, Any]:
        """Every field as JSON-ready values."""
        return dataclasses.asdict(self)


def _run_recurrence(x: torch.Tensor, decay: torch.Tensor, form: Form) -> torch.Tensor:
    """:func:`~rope_lessons.chapters.recurrence.linear_recurrence_parallel` or
    :func:`~rope_lessons.chapters.recurrence.linear_recurrence` on ``x`` ``(..., T, n)``."""
    if form == "parallel":
        return linear_recurrence_parallel(x, decay)
    return linear_recurrence(x, decay)


def _ring_log_decay(channels: int, r_min: float, r_max: float) -> torch.Tensor:
    r"""LRU's ring: :math:`\nu` for :math:`|\lambda| = e^{-e^\nu}`, :math:`|\lambda|^2` uniform.

    :math:`|\lambda|^2` is drawn uniformly from ``[r_min^2, r_max^2]``.
    """
    u = torch.rand(channels)
    modulus = (r_min**2 + u * (r_max**2 - r_min**2)).sqrt()
    return (-modulus.log()).log()


class RealDecayMixer(nn.Module):
    r"""A diagonal linear recurrence with real decays :math:`\lambda_j = e^{-e^{\nu_j}} \in (0, 1)`.

    :math:`s_t = \lambda \odot s_{t-1} + \sqrt{1-\lambda^2} \odot B u_t`,
    output :math:`C s_t`, with ``2N`` real channels.
    """

    def __init__(self, config: RecurrentConfig) -> None:
        super().__init__()
        channels = 2 * config.state
        self.form: Form = config.form
        self.log_rate = nn.Parameter(_ring_log_decay(channels, config.r_min, config.r_max))
        self.inp = nn.Linear(config.dim, channels, bias=False)
        self.out = nn.Linear(channels, config.dim, bias=False)

    def decay(self) -> torch.Tensor:
        """The decays ``(2N,)``, real, in ``(0, 1)``."""
        return torch.exp(-self.log_rate.exp())

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """``u`` ``(B, T, C)`` -> ``(B, T, C)``."""
        decay = self.decay()
        x = self.inp(u) * (1 - decay**2).sqrt()  # (B, T, 2N)
        out: torch.Tensor = self.out(_run_recurrence(x, decay, self.form))
        return out


class ComplexDecayMixer(nn.Module):
    r"""The LRU layer: complex decays :math:`\lambda_j = \exp(-e^{\nu_j} + i e^{\phi_j})`.

    :math:`s_t = \lambda \odot s_{t-1} + \gamma \odot B u_t` with ``N``
    complex channels, output :math:`\mathrm{Re}(C s_t)`; :math:`\gamma` is
    trained, initialised to :math:`\sqrt{1 - |\lambda|^2}`. Moduli start on
    the ring ``[r_min, r_max]``, phases in ``[0, max_phase]``.
    """

    def __init__(self, config: RecurrentConfig) -> None:
        super().__init__()
        n = config.state
        self.form: Form = config.form
        self.log_rate = nn.Parameter(_ring_log_decay(n, config.r_min, config.r_max))
        self.log_phase = nn.Parameter((torch.rand(n) * config.max_phase).log())
        modulus = torch.exp(-self.log_rate.detach().exp())
        self.log_gamma = nn.Parameter(0.5 * (1 - modulus**2).log())
        self.inp = nn.Linear(config.dim, 2 * n, bias=False)  # real and imaginary parts of B
        self.out = nn.Linear(2 * n, config.dim, bias=False)  # [Re s, Im s] -> Re(C s)

    def decay(self) -> torch.Tensor:
        """The decays ``(N,)``, complex, inside the unit disc."""
        return torch.exp(torch.complex(-self.log_rate.exp(), self.log_phase.exp()))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """``u`` ``(B, T, C)`` -> ``(B, T, C)``."""
        real, imag = self.inp(u).chunk(2, dim=-1)  # (B, T, N) each
        x = torch.complex(real, imag) * self.log_gamma.exp()
        states = _run_recurrence(x, self.decay(), self.form)  # (B, T, N) complex
        out: torch.Tensor = self.out(torch.cat((states.real, states.imag), dim=-1))
        return out


class RetentionMixer(nn.Module):
    r"""Retention: :math:`o_t = \sum_{u \le t} \gamma_h^{t-u} (R_t q_t)^\top (R_u k_u) v_u`.

    Real decays (:func:`~rope_lessons.chapters.recurrence.retnet_decays`), RoPE on queries and keys
    (:func:`~rope_lessons.toy.rotary_attention.rotate_inputs` with ``placement="qk"``), no
    softmax; each head's output normalised (RetNet's group norm) before the
    output projection. The recurrent form keeps a ``D x D`` state per head,
    :math:`S_t = \gamma_h S_{t-1} + (R_t k_t) v_t^\top`, read by :math:`R_t q_t`.
    """

    def __init__(self, config: RecurrentConfig) -> None:
        super().__init__()
        self.config = config
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.norm = nn.GroupNorm(config.n_heads, config.dim, affine=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)
        self.rope = Rope(config.dim // config.n_heads, config.rope_base)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """``u`` ``(B, T, C)`` -> ``(B, T, C)``."""
        cfg = self.config
        head_dim = cfg.dim // cfg.n_heads
        q, k, v = (
            t.reshape(*t.shape[:-1], cfg.n_heads, head_dim).transpose(1, 2)
            for t in self.qkv(u).split(cfg.dim, dim=-1)
        )  # (B, H, T, D) each
        q, k, v = rotate_inputs(q, k, v, placement="qk", rope=self.rope)  # R_t q_t, R_u k_u
        q = q / math.sqrt(head_dim)
        gammas = retnet_decays(cfg.n_heads).to(u.device)
        if cfg.form == "parallel":
            weights = (q @ k.transpose(-2, -1)) * decay_powers(gammas, u.shape[1])  # (B, H, T, T)
            out = weights @ v  # (B, H, T, D)
        else:
            outer = (k.unsqueeze(-1) * v.unsqueeze(-2)).flatten(-2)  # (B, H, T, D*D)
            states = torch.stack(
                [linear_recurrence(outer[:, h], gammas[h]) for h in range(cfg.n_heads)], dim=1
            ).reshape(*outer.shape[:-1], head_dim, head_dim)  # (B, H, T, D, D)
            out = (q.unsqueeze(-2) @ states).squeeze(-2)  # (B, H, T, D)
        out = out.transpose(1, 2).flatten(-2)  # (B, T, C)
        mixed: torch.Tensor = self.out(self.norm(out.flatten(0, 1)).view_as(out))
        return mixed


def make_mixer(config: RecurrentConfig) -> nn.Module:
    """The mixer that ``config.mixer`` names."""
    mixers: dict[str, type[nn.Module]] = {
        "real": RealDecayMixer,
        "complex": ComplexDecayMixer,
        "retnet": RetentionMixer,
    }
    return mixers[config.mixer](config)


class RecurrentBlock(nn.Module):
    """Pre-LayerNorm block: ``x + mixer(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, config: RecurrentConfig) -> None:
        super().__init__()
        self.ln_mix = nn.LayerNorm(config.dim)
        self.mixer = make_mixer(config)
        self.ln_mlp = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, config.mlp_ratio * config.dim),
            nn.GELU(),
            nn.Linear(config.mlp_ratio * config.dim, config.dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, T, C)`` -> ``(B, T, C)``."""
        x = x + self.mixer(self.ln_mix(x))
        out: torch.Tensor = x + self.mlp(self.ln_mlp(x))
        return out


class RecurrentModel(nn.Module):
    """Embedding, recurrent blocks, linear head: tokens ``(B, T)`` -> logits ``(B, T, V)``.

    The same interface as :class:`~rope_lessons.toy.model.TinyTransformer`, so
    :func:`~rope_lessons.evidence.training.train` and
    :func:`~rope_lessons.evidence.training.evaluate` run it unchanged. There is no
    position encoding besides what the mixer itself does.

    Example:
        >>> model = RecurrentModel(RecurrentConfig(vocab_size=10, mixer="real"))
        >>> model(torch.zeros(2, 7, dtype=torch.long)).shape
        torch.Size([2, 7, 10])
    """

    def __init__(self, config: RecurrentConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.blocks = nn.ModuleList(RecurrentBlock(config) for _ in range(config.n_layers))
        self.ln_out = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, T, V)`` for token ids ``(B, T)``."""
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.is_floating_point():
            raise TypeError("tokens must be an integer tensor of shape (batch, seq)")
        x = self.embed(tokens)  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.head(self.ln_out(x))  # (B, T, V)
        return logits


# --- what a trained model predicts ------------------------------------------------


def prediction_lags(model: nn.Module, tokens: torch.Tensor, max_lag: int) -> torch.Tensor:
    """How often the model's prediction at ``t`` equals the token ``d`` steps back, per ``d``.

    Args:
        model: maps tokens ``(B, T)`` to logits ``(B, T, V)``.
        tokens: ``(B, T)``, ``T > max_lag``.
        max_lag: the largest ``d``.

    Returns:
        ``(max_lag + 1,)`` float64: entry ``d`` is the fraction of positions
        ``t >= max_lag`` whose argmax is ``tokens[t - d]``.
    """
    max_lag = check_positive_int(max_lag, "max_lag")
    if tokens.ndim != 2 or tokens.shape[1] <= max_lag:
        raise ValueError(f"tokens must be (batch, seq) with seq > max_lag={max_lag}")
    with torch.no_grad():
        predicted = model(tokens).argmax(-1)[:, max_lag:]  # (B, T - max_lag)
    seq_len = tokens.shape[1]
    return torch.stack(
        [
            (predicted == tokens[:, max_lag - d : seq_len - d]).double().mean()
            for d in range(max_lag + 1)
        ]
    )
