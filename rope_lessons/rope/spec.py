"""The :class:`Rope` spec: one object that holds a RoPE's frequencies, layout,
attention factor and rotating slice, and applies them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from rope_lessons._checks import (
    ROTARY_SLICES,
    Layout,
    RotarySlice,
    check_even_dim,
    check_features,
    check_layout,
    check_positions,
    check_theta,
)
from rope_lessons.rope.hf_config import hf_rope
from rope_lessons.rope.kernels import _along, _rope_kernel, read_pairs, score_at_distance
from rope_lessons.rope.ladder import frequencies, rotation_angles


class Rope:
    r"""One RoPE setting, validated once: the per-pair frequencies :math:`\theta`, the
    layout and the attention factor.

    ``Rope(dim, base=10000.0, layout="interleaved", p=1.0)`` builds RoFormer's
    ladder :math:`\theta_k = b^{-2k/d}` (p-RoPE keeps the fastest fraction ``p``
    of the pairs); :meth:`from_theta` takes any frequency vector, e.g. a
    context-extension table. The object is immutable and hashable; two specs
    are equal when their frequencies, layout, attention factor and (for partial
    rotary) rotated slice are.

    **Partial rotary is not p-RoPE.** With ``rotary_dim=r < dim`` only ``r`` of
    the head's ``d`` features rotate (Hugging Face's ``partial_rotary_factor``:
    GPT-NeoX, Phi, Qwen3-Next; DeepSeek's ``[nope | rope]`` heads), on a ladder
    recomputed for ``r``, :math:`b^{-2k/r}`, and the other ``d - r`` pass
    through; ``rotary_slice`` says where the rotating features sit,
    ``"leading"`` (``x[..., :r]``, Hugging Face) or ``"trailing"``
    (``x[..., d-r:]``, DeepSeek). p-RoPE (``p < 1``) keeps the full-head
    ladder :math:`b^{-2k/d}` and sets its slowest pairs to frequency 0.

    Attributes:
        dim: the head dimension ``d`` the spec applies to.
        rotary_dim: how many of its features rotate, ``2 * len(theta)``; ``dim``
            unless partial.
        rotary_slice: ``"leading"`` or ``"trailing"``: where those features sit
            (``"leading"`` when every feature rotates).
        layout: ``"interleaved"`` or ``"half"`` (see :func:`~.split_pairs`), within
            the rotating features.
        attention_factor: the factor by which queries and keys are scaled
            (YaRN's and LongRoPE's temperature); 1 for plain RoPE. :meth:`apply`
            and :meth:`cos_sin` multiply it in, as transformers' tables do
            (``apply(x, scale=False)`` is the rotation alone); with partial
            rotary, into the rotating features only, as transformers applies it.
        base, p: the ladder it was built from, or None for :meth:`from_theta`.
    """

    __slots__ = (
        "_theta",
        "_values",
        "attention_factor",
        "base",
        "dim",
        "layout",
        "p",
        "rotary_dim",
        "rotary_slice",
    )

    _theta: torch.Tensor
    _values: tuple[float, ...]
    attention_factor: float
    base: float | None
    dim: int
    layout: Layout
    p: float | None
    rotary_dim: int
    rotary_slice: RotarySlice

    def __init__(
        self,
        dim: int,
        base: float = 10000.0,
        layout: Layout = "interleaved",
        p: float = 1.0,
        *,
        attention_factor: float = 1.0,
        rotary_dim: int | None = None,
        rotary_slice: RotarySlice = "leading",
    ) -> None:
        head_dim = check_even_dim(dim)
        rotating = head_dim if rotary_dim is None else _rotary_dim(rotary_dim, head_dim)
        theta = frequencies(rotating, base, p=p)
        self._settle(theta, layout, attention_factor, float(base), float(p), head_dim, rotary_slice)

    @classmethod
    def from_theta(
        cls,
        theta: torch.Tensor | Sequence[float],
        layout: Layout = "interleaved",
        *,
        attention_factor: float = 1.0,
        head_dim: int | None = None,
        rotary_slice: RotarySlice = "leading",
    ) -> Rope:
        """A spec for any per-pair frequency vector ``(r/2,)`` (a tensor, list or tuple):
        finite, >= 0, in the order of :func:`~.frequencies` (pair 0 first). ``head_dim``
        (default ``r``) larger than ``r`` makes it partial rotary (see the class)."""
        if not isinstance(theta, torch.Tensor):
            if not isinstance(theta, (list, tuple)) or not theta:
                raise TypeError(
                    f"theta must be a tensor, list or tuple of frequencies, got {theta!r}"
                )
            theta = torch.tensor([float(value) for value in theta], dtype=torch.float64)
        if theta.ndim != 1 or theta.numel() == 0:
            raise ValueError(f"theta must have shape (d/2,), got {tuple(theta.shape)}")
        spec = cls.__new__(cls)
        checked = check_theta(theta, 2 * theta.numel()).detach().to("cpu", torch.float64)
        rotating = 2 * theta.numel()
        dim = rotating if head_dim is None else check_even_dim(head_dim)
        _rotary_dim(rotating, dim)
        spec._settle(checked, layout, attention_factor, None, None, dim, rotary_slice)
        return spec

    @classmethod
    def from_hf(
        cls,
        config: Any,
        layer_type: str | None = None,
        *,
        seq_len: int | None = None,
        layout: Layout = "half",
        rotary_slice: RotarySlice = "leading",
    ) -> Rope:
        """The spec of a Hugging Face configuration (object, dict, or the path of a
        ``config.json`` or its folder): transformers' frequencies and attention factor for
        its ``rope_type``, in the half layout by default, partial rotary where the
        configuration says so. ``config``, ``layer_type`` and ``seq_len``, what is read
        and what is refused are those of :func:`~rope_lessons.rope.hf_config.hf_rope`.

        Args:
            layout: ``"half"`` (transformers' ``rotate_half``) or ``"interleaved"``.
            rotary_slice: where the rotating features of a partial-rotary head sit:
                ``"leading"`` (transformers' ``apply_rotary_pos_emb``) or
                ``"trailing"`` (DeepSeek's ``[nope | rope]`` heads, which their
                modeling code says, not their configuration).
        """
        read = hf_rope(config, layer_type, seq_len=seq_len)
        rotary_dim = 2 * read.theta.numel()
        if read.base is not None and read.p is not None:
            if rotary_dim == read.head_dim:
                return cls(read.head_dim, read.base, layout, p=read.p)
            if read.p == 1.0:
                return cls(
                    read.head_dim,
                    read.base,
                    layout,
                    rotary_dim=rotary_dim,
                    rotary_slice=rotary_slice,
                )
        if rotary_dim == read.head_dim:
            return cls.from_theta(read.theta, layout, attention_factor=read.attention_factor)
        return cls.from_theta(
            read.theta,
            layout,
            attention_factor=read.attention_factor,
            head_dim=read.head_dim,
            rotary_slice=rotary_slice,
        )

    def to_hf(self) -> dict[str, Any]:
        """``rope_parameters`` for ``spec``, where one exists: the inverse of :meth:`from_hf`.

        Two rope types are supported, those whose parameters a spec determines:
        ``"default"`` (RoPE's ladder, ``p = 1``; with ``partial_rotary_factor`` for
        leading partial rotary) and ``"proportional"`` with ``partial_rotary_factor
        = p`` (p-RoPE, Gemma 4). So
        ``Rope.from_hf({"head_dim": spec.dim, "rope_parameters": spec.to_hf()})``
        is ``spec`` again in the half layout. A spec built from its frequencies
        (:meth:`~rope_lessons.rope.spec.Rope.from_theta`) converts when they are exactly
        RoPE's ladder for some base (of at most 12 significant digits) and ``p``,
        so that two equal specs convert alike. A configuration does not record the
        layout (that is in a model's code), so an interleaved spec maps to the same
        parameters.

        The extension types (``"linear"``, ``"dynamic"``, ``"yarn"``,
        ``"longrope"``, ``"llama3"``) are not inverted: several configurations give
        the same frequencies, or one gives several (by ``seq_len``); keep the
        configuration the spec came from.

        Raises:
            ValueError: for frequencies that are not RoPE's ladder, or with an
                attention factor other than 1.
        """
        if self.attention_factor != 1.0:
            raise ValueError(
                f"attention factor {self.attention_factor:g}: 'default' and 'proportional' have "
                "none (an extension method's spec: keep the configuration it came from)"
            )
        ladder = _as_ladder(self)
        if ladder is None:
            raise ValueError(
                "this spec's frequencies are not RoPE's ladder for any base (an extension "
                "method's, or custom ones): no rope_parameters of type 'default' or "
                "'proportional' gives them; keep the configuration they came from"
            )
        base, p = ladder
        if self.partial:
            if p != 1.0 or self.rotary_slice != "leading":
                raise ValueError(
                    "partial rotary maps to rope_parameters only with p = 1 and the rotating "
                    f"features leading, got p = {p:g}, {self.rotary_slice!r}"
                )
            factor = self.rotary_dim / self.dim
            return {"rope_type": "default", "rope_theta": base, "partial_rotary_factor": factor}
        if p == 1.0:
            return {"rope_type": "default", "rope_theta": base}
        return {"rope_type": "proportional", "rope_theta": base, "partial_rotary_factor": p}

    def _settle(
        self,
        theta: torch.Tensor,
        layout: Layout,
        attention_factor: float,
        base: float | None,
        p: float | None,
        dim: int | None = None,
        rotary_slice: RotarySlice = "leading",
    ) -> None:
        if rotary_slice not in ROTARY_SLICES:
            raise ValueError(f"rotary_slice must be one of {ROTARY_SLICES}, got {rotary_slice!r}")
        if (
            isinstance(attention_factor, bool)
            or not isinstance(attention_factor, (int, float))
            or not math.isfinite(attention_factor)
            or attention_factor <= 0
        ):
            raise ValueError(
                f"attention_factor must be a finite number > 0, got {attention_factor!r}"
            )
        values = tuple(theta.tolist())
        rotating = 2 * len(values)
        head_dim = rotating if dim is None else dim
        for name, value in (
            ("_theta", torch.tensor(values, dtype=torch.float64)),
            ("_values", values),
            ("attention_factor", float(attention_factor)),
            ("base", base),
            ("dim", head_dim),
            ("layout", check_layout(layout)),
            ("p", p),
            ("rotary_dim", rotating),
            ("rotary_slice", rotary_slice if rotating < head_dim else "leading"),
        ):
            object.__setattr__(self, name, value)

    @property
    def partial(self) -> bool:
        """Whether only some of the head's features rotate (:attr:`rotary_dim` < :attr:`dim`)."""
        return self.rotary_dim < self.dim

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Rope is immutable: build a new one instead of setting {name!r}")

    def __copy__(self) -> Rope:
        return self  # immutable: a copy would be indistinguishable

    def __deepcopy__(self, memo: dict[int, object]) -> Rope:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by value (the frozen attributes cannot be set one by one)."""
        return (_rebuilt_rope, self._state(self.layout))

    def _state(self, layout: Layout) -> tuple[Any, ...]:
        """The arguments of ``_rebuilt_rope`` for this spec in ``layout``."""
        return (
            self._values,
            layout,
            self.attention_factor,
            self.base,
            self.p,
            self.dim,
            self.rotary_slice,
        )

    @property
    def theta(self) -> torch.Tensor:
        """The frequencies, float64 ``(r/2,)`` for the :attr:`rotary_dim` ``r`` rotating
        features (a copy: the spec cannot be changed)."""
        return self._theta.clone()

    def apply(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        seq_dim: int = -2,
        scale: bool = True,
    ) -> torch.Tensor:
        """:math:`a R_m x` at every position: what transformers' ``apply_rotary_pos_emb``
        gives for the same configuration (:meth:`from_hf`), the attention factor ``a``
        included.

        Args:
            x: ``(..., T, d)`` with ``d`` equal to :attr:`dim`.
            positions: integer positions broadcastable to ``(..., T)``; default ``arange(T)``.
            seq_dim: the axis of the positions; ``1`` for ``(B, T, H, d)`` features
                (see :func:`~rope_lessons.rope.kernels.apply_rope`).
            scale: multiply the rotated features by :attr:`attention_factor` (YaRN's
                and LongRoPE's; 1 for RoPE's ladder, where the flag changes nothing).
                ``False`` gives the rotation :math:`R_m x` alone, which is
                :func:`~rope_lessons.rope.kernels.apply_rope` with this spec.
        """
        x = check_features(x)
        self.check_dim(x.shape[-1], "the last dimension of x", partial_ok=True)
        if not isinstance(scale, bool):
            raise TypeError(f"scale must be True or False, got {scale!r}")

        def rotate_seq_last(seq_last: torch.Tensor) -> torch.Tensor:
            if positions is None:
                return self._rotate(seq_last, None, scale=scale)
            checked = check_positions(positions, seq_last.shape[:-1])
            return self._rotate(seq_last, checked, scale=scale)

        return _along(x, seq_dim, rotate_seq_last)

    def check_dim(self, dim: int, what: str, *, partial_ok: bool = False) -> None:
        """Refuse vectors whose dimension ``dim`` (named ``what``) is not :attr:`dim`, and,
        unless ``partial_ok``, a partial-rotary spec: the functions that read every pair of
        a head (scores by distance, norms by pair, bounds) need a head that rotates whole."""
        if dim != self.dim:
            raise ValueError(
                f"this spec rotates d = {self.dim} dimensions ({self.dim // 2} pairs), "
                f"but {what} is {dim}: build Rope({dim}, ...) for them"
            )
        if self.partial and not partial_ok:
            raise ValueError(
                f"this spec rotates only {self.rotary_dim} of its {self.dim} features "
                "(partial rotary), and this function reads every pair of a fully rotating "
                f"head: pass it the {self.rotary_slice} {self.rotary_dim} features with "
                "the spec of those alone, Rope.from_theta(spec.theta, spec.layout)"
            )

    def _rotate(
        self, x: torch.Tensor, positions: torch.Tensor | None, *, scale: bool = False
    ) -> torch.Tensor:
        """:meth:`apply` without its checks: ``x`` ``(..., T, d)`` with ``d`` = :attr:`dim`,
        ``positions`` None or as :func:`~rope_lessons._checks.check_positions` returns them.
        With ``scale`` the rotated features are also multiplied by the attention factor
        (all of them; with partial rotary, the rotating ones only)."""
        factor = self.attention_factor if scale else 1.0
        if not self.partial:
            turned = _rope_kernel(x, positions, self._values, self.layout)
            return turned if factor == 1.0 else turned * factor
        r = self.rotary_dim
        if self.rotary_slice == "leading":
            rotating, passing = x[..., :r], x[..., r:]
        else:
            passing, rotating = x[..., : self.dim - r], x[..., self.dim - r :]
        turned = _rope_kernel(rotating, positions, self._values, self.layout)
        if factor != 1.0:
            turned = turned * factor
        parts = (turned, passing) if self.rotary_slice == "leading" else (passing, turned)
        return torch.cat(parts, -1)

    def cos_sin(
        self,
        positions: torch.Tensor,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Hugging Face-shaped tables: ``cos`` and ``sin`` of shape ``(..., r)``.

        What a transformers rotary embedding returns for ``position_ids`` of the
        same shape (``(B, T)`` there), so that the spec can stand in for one: each
        pair's angle :math:`m\theta_k` written to both of its features (the half
        layout concatenates the ``r/2`` angles twice, the interleaved layout
        repeats each one), and the attention factor multiplied in, as transformers
        multiplies it in (so that ``q * cos + rotate_half(q) * sin`` scales the
        queries by it, as :meth:`apply` does).

        The angles are formed in float64 and rounded once, to ``dtype``.
        transformers forms them in float32 (``inv_freq`` and ``inv_freq @
        position_ids``), so its tables differ from these by a few float32
        spacings of the angle, which grow with the position: measured against a
        Llama rotary embedding (bases 1e4 to 1e6, ``d = 128``), about 4e-4 for
        positions below 5000 and 6e-3 below 80,000 (kernels differ in the last
        bits). A port test at ``atol=1e-5`` sees that difference; these tables
        are the accurate ones.

        Args:
            positions: integer tensor of any shape, e.g. ``(T,)`` or ``(B, T)``.
            dtype: the tables' dtype.
            device: default that of ``positions``.

        Returns:
            ``(cos, sin)``, each ``positions.shape + (r,)`` for the :attr:`rotary_dim`
            ``r`` (the head dimension unless partial rotary, where transformers'
            tables also cover the rotating features only).
        """
        if not isinstance(positions, torch.Tensor) or positions.is_floating_point():
            raise TypeError("positions must be an integer tensor")
        device = positions.device if device is None else torch.device(device)
        angles = self.angles(positions.to(device))  # (..., r/2)
        if self.layout == "half":
            angles = torch.cat((angles, angles), -1)
        else:
            angles = angles.repeat_interleave(2, -1)
        factor = self.attention_factor
        return (angles.cos() * factor).to(dtype), (angles.sin() * factor).to(dtype)

    def angles(self, positions: torch.Tensor) -> torch.Tensor:
        r"""The angles :math:`m\theta_k`, float64 ``(..., r/2)``, for integer positions."""
        return rotation_angles(positions, self.rotary_dim, theta=self._theta)

    def pairs(self, x: torch.Tensor) -> torch.Tensor:
        """Pair ``k`` of ``x`` as a complex number, in this spec's layout (:func:`~.read_pairs`);
        a fully rotating spec only (see :meth:`check_dim`)."""
        self.check_dim(x.shape[-1], "the last dimension of x")
        return read_pairs(x, self.layout)

    def score_at_distance(
        self, q: torch.Tensor, k: torch.Tensor, distances: torch.Tensor
    ) -> torch.Tensor:
        """:func:`score_at_distance` with this spec: float64 ``(..., R)``; a fully rotating
        spec only (see :meth:`check_dim`)."""
        self.check_dim(q.shape[-1], "the last dimension of q")
        return score_at_distance(q, k, distances, layout=self.layout, theta=self._theta)

    def describe(self) -> str:
        """One line for a reader: dimension, where the frequencies come from, layout, factor."""
        rotating = sum(value > 0 for value in self._values)
        origin = (
            f"base {self.base:g}, p = {self.p:g}"
            if self.base is not None
            else f"custom frequencies {self._values[0]:.3g} to {self._values[-1]:.3g}"
        )
        partial = (
            f", partial rotary: the {self.rotary_slice} {self.rotary_dim} features"
            if self.partial
            else ""
        )
        return (
            f"RoPE, d = {self.dim}{partial}, {origin} ({rotating} of {self.dim // 2} pairs "
            f"rotate), {self.layout} layout, attention factor {self.attention_factor:g}"
        )

    def with_layout(self, layout: Layout) -> Rope:
        """The same frequencies and attention factor in ``layout``."""
        return _rebuilt_rope(*self._state(layout))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values: the frequencies, layout and attention factor that define
        the spec, and the ladder it was built from (``base``, ``p``; None for
        :meth:`from_theta`; with partial rotary, ``rotary_dim`` and
        ``rotary_slice`` too). Stored sweeps describe their models with it."""
        values: dict[str, Any] = {
            "dim": self.dim,
            "base": self.base,
            "p": self.p,
            "theta": list(self._values),
            "layout": self.layout,
            "attention_factor": self.attention_factor,
        }
        if self.partial:
            values |= {"rotary_dim": self.rotary_dim, "rotary_slice": self.rotary_slice}
        return values

    def _identity(self) -> tuple[tuple[float, ...], str, float, int, str]:
        return self._values, self.layout, self.attention_factor, self.dim, self.rotary_slice

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rope) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        partial = (
            f", rotary_dim={self.rotary_dim}, rotary_slice={self.rotary_slice!r}"
            if self.partial
            else ""
        )
        if self.base is not None:
            return (
                f"Rope({self.dim}, base={self.base:g}, layout={self.layout!r}, p={self.p:g}, "
                f"attention_factor={self.attention_factor:g}{partial})"
            )
        head = f", head_dim={self.dim}, rotary_slice={self.rotary_slice!r}" if self.partial else ""
        return (
            f"Rope.from_theta({list(self._values)!r}, layout={self.layout!r}, "
            f"attention_factor={self.attention_factor:g}{head})"
        )


def _rebuilt_rope(
    values: tuple[float, ...],
    layout: Layout,
    attention_factor: float,
    base: float | None,
    p: float | None,
    dim: int | None = None,
    rotary_slice: RotarySlice = "leading",
) -> Rope:
    """A :class:`Rope` from its pickled state (see ``Rope.__reduce__``)."""
    spec = Rope.__new__(Rope)
    theta = torch.tensor(values, dtype=torch.float64)
    spec._settle(theta, layout, attention_factor, base, p, dim, rotary_slice)
    return spec


def _rotary_dim(rotary_dim: object, head_dim: int) -> int:
    """``rotary_dim`` if it is an even int in ``2 .. head_dim``."""
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int):
        raise TypeError(f"rotary_dim must be an int, got {rotary_dim!r}")
    if rotary_dim % 2 or not 2 <= rotary_dim <= head_dim:
        raise ValueError(
            f"rotary_dim must be even and in 2 .. {head_dim} (the head dimension), got {rotary_dim}"
        )
    return rotary_dim


def _as_ladder(spec: Rope) -> tuple[float, float] | None:
    """``(base, p)`` of the ladder ``spec``'s frequencies are, or None."""
    if spec.base is not None and spec.p is not None:
        return spec.base, spec.p
    theta = spec.theta
    rotating = int((theta > 0).sum())
    if rotating < 2 or theta[0] != 1.0 or bool((theta[rotating:] != 0).any()):
        return None
    base = float(f"{float(theta[1]) ** (-spec.rotary_dim / 2):.12g}")
    p = rotating / (spec.rotary_dim // 2)
    if base <= 1.0:
        return None
    candidate = Rope(
        spec.dim,
        base,
        spec.layout,
        p=p,
        rotary_dim=spec.rotary_dim,
        rotary_slice=spec.rotary_slice,
    )
    return (base, p) if candidate == spec else None
