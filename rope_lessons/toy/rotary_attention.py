r"""Scaled dot-product attention with RoPE applied at any of nine placements.

The placement names where the rotation acts (J. Su, "The second kind of rotary
position embedding", kexue.fm/archives/10862, 2025):

===========  ===============================================================
``nope``     no rotation anywhere
``q``        queries rotated by :math:`R_m`
``k``        keys rotated by :math:`R_n`
``v``        values rotated by :math:`R_n`
``o``        each output :math:`o_m` rotated by :math:`R_m^\top`
``qk``       the usual RoPE: queries and keys
``vo``       values by :math:`R_n`, outputs by :math:`R_m^\top`, so that
             :math:`o_m = \sum_n a_{mn} R_{n-m} v_n`
``qkv``      queries, keys and values
``qkvo``     all four
===========  ===============================================================

Only ``qk``, ``vo`` and ``qkvo`` (and trivially ``nope``) give outputs that
depend on relative positions alone; the others are absolute encodings.

The rotations themselves live in :func:`rotate_inputs` and
:func:`rotate_output`, apart from the softmax, so that any other kernel
(linear attention, a recurrence) reuses exactly the same placements.

Shapes: ``B`` batch, ``H`` heads, ``T`` sequence length, ``D`` head dimension.

Attention as used in inference (:func:`attention`):

* queries ``(B, H, T_q, D)`` and keys and values ``(B, H_kv, T_k, D)`` may
  differ in length (a decode step against a cache: ``T_q = 1``) and in
  heads: grouped-query (GQA) and multi-query (MQA, ``H_kv = 1``) attention
  share key and value head ``j`` among query heads ``j * H/H_kv .. (j+1) *
  H/H_kv - 1``, as Hugging Face's ``repeat_kv`` and PyTorch's ``enable_gqa``;
* positions: ``positions`` is shared by queries and keys (it needs
  ``T_q == T_k``); ``q_positions`` and ``k_positions`` give each its own
  (never together with ``positions``). By default the keys sit at ``0 ..
  T_k-1`` and the queries at the *end* of the keys, ``T_k-T_q .. T_k-1``:
  the last ``T_q`` tokens of the sequence the cache holds;
* rotations: ``q`` turns by the query positions, ``k`` and ``v`` by the key
  positions, and ``o`` turns each output back by its *query* position;
* the causal mask: by index with default or shared positions, aligned with
  the end of the keys (query ``i`` sees keys ``0 .. T_k-T_q+i``; with
  ``T_q == T_k`` this is the usual lower triangle). With ``q_positions`` or
  ``k_positions`` it follows the positions instead: key ``n`` is visible to
  query ``m`` iff ``k_position[n] <= q_position[m]`` (equal positions
  included). For default positions the two rules agree. A query that would
  see no key at all is refused, rather than given an undefined output;
* masks the caller gives: ``key_mask`` ``(B, T_k)``, True (or 1) for the keys
  that are real tokens and False (0) for padding, as Hugging Face's
  ``attention_mask``; and ``attn_mask``, broadcastable to ``(B, H, T_q,
  T_k)``, boolean (True: may attend) or floating (added to the logits), as
  PyTorch's ``scaled_dot_product_attention`` reads it. Both are combined with
  the causal and local masks. A query left without any key by them (a padding
  query in a left-padded row) gets the output 0 and weights 0, where a
  softmax over nothing would give NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args, overload

import torch
import torch.nn.functional as F
from torch.torch_version import TorchVersion

from rope_lessons._checks import check_choice, check_positions, check_positive_int
from rope_lessons.rope.kernels import rotate
from rope_lessons.rope.spec import Rope

Placement = Literal["nope", "q", "k", "v", "o", "qk", "vo", "qkv", "qkvo"]
PLACEMENTS: tuple[Placement, ...] = get_args(Placement)
RELATIVE_PLACEMENTS: tuple[Placement, ...] = ("nope", "qk", "vo", "qkvo")

LocalKind = Literal["window", "chunk"]


@dataclass(frozen=True)
class Local:
    """Attention restricted to nearby keys.

    Attributes:
        size: the window or chunk length, in positions.
        kind: ``"window"``: a query at ``m`` sees keys at ``n`` with
            ``|m - n| < size`` (with the causal mask, the last ``size`` keys:
            a sliding window, as in Mistral or Su's windowed layers);
            ``"chunk"``: it sees the keys of its own chunk, ``m // size == n //
            size`` (Llama 4's chunked attention in its RoPE layers).

    Example:
        >>> Local(2).allows(torch.tensor([3]), torch.tensor([1, 2, 3]))
        tensor([False,  True,  True])
        >>> Local(2, "chunk").allows(torch.tensor([3]), torch.tensor([1, 2, 3]))
        tensor([False,  True,  True])
    """

    size: int
    kind: LocalKind = "window"

    def __post_init__(self) -> None:
        check_positive_int(self.size, "size")
        check_choice(self.kind, "kind", get_args(LocalKind))

    def allows(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        """True where a query may see a key; the two position tensors broadcast."""
        if self.kind == "window":
            return (q_positions - k_positions).abs() < self.size
        return torch.div(q_positions, self.size, rounding_mode="floor") == torch.div(
            k_positions, self.size, rounding_mode="floor"
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready values."""
        return {"size": self.size, "kind": self.kind}


# ``enable_gqa`` came with torch 2.5; before it, key and value heads are repeated.
_SDPA_HAS_GQA = TorchVersion(torch.__version__) >= "2.5"


def check_placement(placement: object) -> Placement:
    """Return ``placement`` if it is one of :data:`PLACEMENTS`."""
    return check_choice(placement, "placement", PLACEMENTS)


def check_rope(rope: object, placement: Placement, dim: int, value_dim: int) -> Rope:
    """The spec a placement rotates with, checked against the vectors it turns.

    Args:
        rope: a :class:`~rope_lessons.rope.spec.Rope`, or None for RoFormer's
            defaults ``Rope(d)`` with ``d`` the dimension of the rotated vectors.
        placement: a checked placement.
        dim: the head dimension ``D`` of the queries and keys.
        value_dim: the dimension ``Dv`` of the values and outputs.

    Raises:
        TypeError: for a string (the placement, which was once passed as
            ``rope``) or anything else that is not a spec.
        ValueError: for a spec whose ``dim`` is not that of the vectors the
            placement rotates, or an attention factor that nothing would apply.
    """
    if isinstance(rope, str) and rope in PLACEMENTS:
        raise TypeError(
            f"rope={rope!r}: the placement is now given as placement={rope!r}, and rope "
            "takes a Rope spec (rope_lessons.Rope), or None for Rope(D)"
        )
    if isinstance(rope, str):
        raise TypeError(
            f"rope must be a Rope spec or None, got the string {rope!r} (placements are "
            f"given as placement=, one of {list(PLACEMENTS)})"
        )
    if rope is not None and not isinstance(rope, Rope):
        raise TypeError(f"rope must be a Rope spec or None, got {type(rope).__name__}")
    rotated = set() if placement == "nope" else set(placement)
    widths = {}
    if rotated & {"q", "k"}:
        widths["the head dimension D of q and k"] = dim
    if rotated & {"v", "o"}:
        widths["the value dimension Dv of v and the output"] = value_dim
    if rope is None:
        if len(set(widths.values())) > 1:
            raise ValueError(
                f"placement {placement!r} rotates q or k (D = {dim}) and v or o "
                f"(Dv = {value_dim}) with one spec, which needs D == Dv"
            )
        return Rope(next(iter(widths.values()), dim))
    for what, width in widths.items():
        if width != rope.dim:
            raise ValueError(
                f"rope.dim = {rope.dim} does not match {what} = {width} "
                f"(placement {placement!r}): build the spec as Rope({width}, ...)"
            )
    if rope.attention_factor != 1.0 and not rotated & {"q", "k"}:
        raise ValueError(
            f"rope.attention_factor = {rope.attention_factor:g} scales the rotated queries "
            f"and keys, but placement {placement!r} rotates neither: it would be ignored"
        )
    return rope


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.ndim != 4:
            raise ValueError(
                f"{name} must have shape (batch, heads, seq, head_dim), got {tuple(t.shape)}"
            )
        if not t.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {t.dtype}")
    if q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "q (B, H, T_q, D) and k (B, H_kv, T_k, D) must have the same batch and head "
            f"dimension, got {tuple(q.shape)} and {tuple(k.shape)}"
        )
    if q.shape[1] % k.shape[1]:
        raise ValueError(
            f"the query heads H = {q.shape[1]} must be a multiple of the key and value heads "
            f"H_kv = {k.shape[1]} (grouped-query attention), got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}"
        )
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(
            f"v must match k in (batch, heads, seq), got {tuple(v.shape)} and {tuple(k.shape)}"
        )
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(
            f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}: "
            "cast them to one (e.g. k.to(q.dtype)) before attention"
        )


def _as_3d(positions: torch.Tensor) -> torch.Tensor:
    """Checked positions (broadcastable to ``(B, H, T)``) as ``(B|1, H|1, T|1)``."""
    shape = positions.shape[-3:]
    return positions.reshape((1,) * (3 - len(shape)) + tuple(shape))


@dataclass(frozen=True)
class _Rotary:
    """A validated placement with its spec and the positions of queries and keys.

    ``q_positions`` and ``k_positions`` are checked int64 tensors, or None for
    ``arange(T)`` (the cached tables). ``by_position`` says the causal mask
    follows them (they were given as ``q_positions``/``k_positions``). Every
    rotation here runs the spec's unchecked kernel: the checks ran once, in
    :meth:`checked`.
    """

    placement: Placement
    rope: Rope
    q_positions: torch.Tensor | None
    k_positions: torch.Tensor | None
    by_position: bool
    theta: torch.Tensor | None = None

    @classmethod
    def checked(
        cls,
        placement: object,
        rope: object,
        q_shape: torch.Size,
        k_shape: torch.Size,
        value_dim: int,
        device: torch.device,
        positions: torch.Tensor | None = None,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        theta: torch.Tensor | None = None,
    ) -> _Rotary:
        """Check everything once, for ``q`` ``(B, H, T_q, D)``, ``k`` ``(B, H_kv, T_k, D)``
        and values of dimension ``value_dim``; ``theta``, if given, replaces the spec's
        frequencies."""
        placement = check_placement(placement)
        spec = check_rope(rope, placement, q_shape[-1], value_dim)
        if theta is not None and spec.partial:
            raise ValueError(
                "theta= (trained angles) needs a fully rotating spec, got one that rotates "
                f"{spec.rotary_dim} of {spec.dim} features (partial rotary)"
            )
        if theta is not None and (
            not isinstance(theta, torch.Tensor)
            or not theta.is_floating_point()
            or theta.shape != (spec.dim // 2,)
            or theta.device != device
        ):
            described = (
                f"{tuple(theta.shape)} {theta.dtype} on {theta.device}"
                if isinstance(theta, torch.Tensor)
                else type(theta).__name__
            )
            raise ValueError(
                f"theta must be a floating tensor of shape ({spec.dim // 2},) on {device}, "
                f"got {described}"
            )
        if theta is not None and not bool(torch.isfinite(theta).all()):
            # the fused path would return finite numbers that match nothing
            raise ValueError(f"theta must be finite (a trained angle diverged?), got {theta}")
        q_lead, k_lead = q_shape[:-1], k_shape[:-1]
        q_len, k_len = q_lead[-1], k_lead[-1]
        by_position = q_positions is not None or k_positions is not None
        if positions is not None:
            if by_position:
                raise ValueError(
                    "positions is shared by queries and keys: give it alone, "
                    "or q_positions and k_positions instead"
                )
            if q_len != k_len:
                raise ValueError(
                    f"positions is shared by queries and keys, so it needs T_q == T_k, got "
                    f"T_q = {q_len} and T_k = {k_len}: give q_positions and k_positions"
                )
            q_positions = check_positions(positions, q_lead)
            k_positions = q_positions if k_lead == q_lead else check_positions(positions, k_lead)
        else:
            if q_positions is not None:
                q_positions = check_positions(q_positions, q_lead, name="q_positions")
            elif q_len != k_len:  # the queries are the last T_q of the keys' positions
                q_positions = torch.arange(k_len - q_len, k_len, device=device)
            if k_positions is not None:
                k_positions = check_positions(k_positions, k_lead, name="k_positions")
        return cls(placement, spec, q_positions, k_positions, by_position, theta)

    def names(self) -> set[str]:
        """Which of q, k, v, o the placement rotates."""
        return set() if self.placement == "nope" else set(self.placement)

    def turn(
        self, x: torch.Tensor, positions: torch.Tensor | None, *, transpose: bool = False
    ) -> torch.Tensor:
        """``R_m x`` at every position, or ``R_m^T x = R_{-m} x`` with ``transpose``."""
        if transpose:
            positions = -(
                positions if positions is not None else torch.arange(x.shape[-2], device=x.device)
            )
        if self.theta is None:
            return self.rope._rotate(x, positions)
        if positions is None:
            positions = torch.arange(x.shape[-2], device=x.device)
        angles = positions.to(self.theta.dtype).unsqueeze(-1) * self.theta  # (..., T, d/2)
        return rotate(x, angles.cos().to(x.dtype), angles.sin().to(x.dtype), self.rope.layout)

    def scaled_turn(self, x: torch.Tensor, positions: torch.Tensor | None) -> torch.Tensor:
        """``a R_m x``: a query or key turned and scaled by the attention factor ``a`` (with
        partial rotary, its rotating features only, as transformers scales them)."""
        if self.theta is None:
            return self.rope._rotate(x, positions, scale=True)
        turned = self.turn(x, positions)
        factor = self.rope.attention_factor
        return turned if factor == 1.0 else turned * factor

    def inputs(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q`` by the query positions, ``k`` and ``v`` by the key positions, where named;
        rotated queries and keys scaled by the spec's attention factor."""
        names = self.names()
        return (
            self.scaled_turn(q, self.q_positions) if "q" in names else q,
            self.scaled_turn(k, self.k_positions) if "k" in names else k,
            self.turn(v, self.k_positions) if "v" in names else v,
        )

    def output(self, out: torch.Tensor) -> torch.Tensor:
        """Each output turned back by its query position, if the placement names ``o``."""
        return self.turn(out, self.q_positions, transpose=True) if "o" in self.names() else out

    def position_grid(
        self, q_len: int, k_len: int, heads: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Query positions ``(B|1, H|1, T_q, 1)`` and key positions ``(B|1, H|1, 1, T_k)``,
        ready to broadcast against each other: the positions given, else by index aligned
        with the end of the keys; per-head key positions repeated over their query group."""
        arange = torch.arange(k_len, device=device)
        q_pos = _as_3d(self.q_positions if self.q_positions is not None else arange[-q_len:])
        k_pos = _as_3d(self.k_positions if self.k_positions is not None else arange)
        if k_pos.shape[1] not in (1, heads):  # per-head key positions, shared by a group
            k_pos = k_pos.repeat_interleave(heads // k_pos.shape[1], dim=1)
        return q_pos[..., :, None].to(device), k_pos[..., None, :].to(device)

    def visible(self, q_len: int, k_len: int, heads: int, device: torch.device) -> torch.Tensor:
        """The causal mask, True where a query may see a key.

        By index, aligned with the end of the keys, ``(T_q, T_k)``; or, when
        the positions were given as ``q_positions``/``k_positions``,
        ``k_position <= q_position``, ``(B|1, H|1, T_q, T_k)``.
        """
        if not self.by_position:
            return torch.ones(q_len, k_len, dtype=torch.bool, device=device).tril(k_len - q_len)
        q_pos, k_pos = self.position_grid(q_len, k_len, heads, device)
        return k_pos <= q_pos

    def near(
        self, local: Local, q_len: int, k_len: int, heads: int, device: torch.device
    ) -> torch.Tensor:
        """Where ``local`` lets a query see a key, ``(B|1, H|1, T_q, T_k)``: by the positions
        given (shared or separate), else by index aligned with the end of the keys."""
        return local.allows(*self.position_grid(q_len, k_len, heads, device))


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, is_causal: bool
) -> torch.Tensor:
    """The fused kernel, with key and value heads shared by groups of query heads."""
    if k.shape[1] == q.shape[1]:
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if _SDPA_HAS_GQA:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, enable_gqa=True
        )
    k, v = _repeat_heads(k, v, q.shape[1])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)


def _repeat_heads(
    k: torch.Tensor, v: torch.Tensor, heads: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Key and value head ``j`` repeated for query heads ``j*g .. j*g + g-1``, ``g = H / H_kv``."""
    group = heads // k.shape[1]
    if group == 1:
        return k, v
    return k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)


def rotate_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    placement: Placement = "qk",
    rope: Rope | None = None,
    positions: torch.Tensor | None = None,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Rotate the queries, keys and values that ``placement`` names.

    ``q`` by :math:`R_m`, ``k`` and ``v`` by :math:`R_n`, each at its own
    position; rotated queries and keys are also multiplied by the spec's
    attention factor (see :func:`attention`). Any attention kernel can run on
    the result; :func:`rotate_output` then applies the ``o`` part of the
    placement.

    Args:
        q: ``(B, H, T_q, D)``; k: ``(B, H_kv, T_k, D)``; v: ``(B, H_kv, T_k, Dv)``.
        placement: one of :data:`PLACEMENTS`.
        rope: the spec, as in :func:`attention`.
        positions, q_positions, k_positions: as in :func:`attention`.

    Returns:
        ``(q, k, v)`` with the named ones rotated, the others unchanged.
    """
    _check_qkv(q, k, v)
    rotary = _Rotary.checked(
        placement, rope, q.shape, k.shape, v.shape[-1], q.device,
        positions, q_positions, k_positions,
    )  # fmt: skip
    return rotary.inputs(q, k, v)


def rotate_output(
    out: torch.Tensor,
    *,
    placement: Placement = "qk",
    rope: Rope | None = None,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Turn each output :math:`o_m` by :math:`R_m^\top` if ``placement`` names ``o``.

    Args:
        out: attention outputs ``(B, H, T, Dv)``.
        placement: as in :func:`rotate_inputs`.
        rope: the spec, ``dim == Dv`` (None: ``Rope(Dv)``); as in :func:`attention`.
        positions: the *query* positions, broadcastable to ``(B, H, T)``
            (2-D means ``(B, T)``); default ``arange(T)``. After a decode step
            give them: ``out`` alone cannot tell where its queries sit.

    Returns:
        ``out`` rotated back, or unchanged.
    """
    if not isinstance(out, torch.Tensor) or out.ndim != 4:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"out must have shape (batch, heads, seq, head_dim), got {shape}")
    rotary = _Rotary.checked(
        placement, rope, out.shape, out.shape, out.shape[-1], out.device, positions
    )
    return rotary.output(out)


@overload
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    placement: Placement = ...,
    rope: Rope | None = ...,
    causal: bool = ...,
    positions: torch.Tensor | None = ...,
    q_positions: torch.Tensor | None = ...,
    k_positions: torch.Tensor | None = ...,
    return_weights: Literal[False] = ...,
    theta: torch.Tensor | None = ...,
    local: Local | None = ...,
    key_mask: torch.Tensor | None = ...,
    attn_mask: torch.Tensor | None = ...,
    sinks: torch.Tensor | None = ...,
) -> torch.Tensor: ...


@overload
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    placement: Placement = ...,
    rope: Rope | None = ...,
    causal: bool = ...,
    positions: torch.Tensor | None = ...,
    q_positions: torch.Tensor | None = ...,
    k_positions: torch.Tensor | None = ...,
    return_weights: Literal[True],
    theta: torch.Tensor | None = ...,
    local: Local | None = ...,
    key_mask: torch.Tensor | None = ...,
    attn_mask: torch.Tensor | None = ...,
    sinks: torch.Tensor | None = ...,
) -> tuple[torch.Tensor, torch.Tensor]: ...


@overload
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    placement: Placement = ...,
    rope: Rope | None = ...,
    causal: bool = ...,
    positions: torch.Tensor | None = ...,
    q_positions: torch.Tensor | None = ...,
    k_positions: torch.Tensor | None = ...,
    return_weights: bool,
    theta: torch.Tensor | None = ...,
    local: Local | None = ...,
    key_mask: torch.Tensor | None = ...,
    attn_mask: torch.Tensor | None = ...,
    sinks: torch.Tensor | None = ...,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]: ...


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    placement: Placement = "qk",
    rope: Rope | None = None,
    causal: bool = True,
    positions: torch.Tensor | None = None,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    return_weights: bool = False,
    theta: torch.Tensor | None = None,
    local: Local | None = None,
    key_mask: torch.Tensor | None = None,
    attn_mask: torch.Tensor | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Softmax attention :math:`o_m = \sum_n a_{mn} v_n` with RoPE at ``placement``.

    The module docstring settles lengths, heads, positions and the mask.

    The spec's attention factor :math:`a` (YaRN's temperature) is applied as
    Hugging Face's ``transformers`` applies ``attention_scaling``: it
    multiplies the cosine and the sine, so every *rotated query and key* is
    :math:`a R_m x`. With placement ``qk`` the logits
    :math:`\langle a R_m q, a R_n k\rangle / \sqrt D` are :math:`a^2` times
    those without it; ``q`` or ``k`` alone scales them by :math:`a`. Values and
    outputs are turned without it, and ``a = 1`` multiplies nothing (the result
    is bit-identical to a spec without a factor). A factor other than 1 with a
    placement that rotates neither queries nor keys is refused.

    Args:
        q: queries ``(B, H, T_q, D)``.
        k: keys ``(B, H_kv, T_k, D)``, ``H_kv`` dividing ``H`` (GQA; 1 for
            MQA); ``T_k`` may differ from ``T_q`` (a decode step: ``T_q = 1``).
        v: values ``(B, H_kv, T_k, Dv)``; ``Dv`` must be even when ``v`` or
            ``o`` is rotated.
        placement: where RoPE rotates, one of :data:`PLACEMENTS`.
        rope: the :class:`~rope_lessons.rope.spec.Rope` spec (frequencies, layout,
            attention factor). Its ``dim`` must be ``D`` when ``q`` or ``k``
            is rotated and ``Dv`` when ``v`` or ``o`` is. None: RoFormer's
            ``Rope(D)`` (``Rope(Dv)`` for the ``v``/``o`` placements).
        causal: mask out keys after the query: by index, aligned with the end
            of the keys; by position (``k_position <= q_position``) when
            ``q_positions`` or ``k_positions`` is given.
        positions: integer positions shared by queries and keys (needs
            ``T_q == T_k``), broadcastable to ``(B, H, T)``; a 2-D tensor is
            ``(B, T)``, even when ``B == H`` (per-head positions are 3-D
            ``(1, H, T)``). Not together with the next two.
        q_positions: the queries' positions, broadcastable to ``(B, H, T_q)``
            (2-D: ``(B, T_q)``); default ``T_k-T_q .. T_k-1``.
        k_positions: the keys' (and values') positions, broadcastable to
            ``(B, H_kv, T_k)`` (2-D: ``(B, T_k)``); default ``0 .. T_k-1``.
        return_weights: also return the attention weights. Without them the
            fused ``torch.nn.functional.scaled_dot_product_attention`` runs.
        theta: frequencies ``(d/2,)`` that replace the spec's (which still
            gives the layout and the attention factor), as a floating tensor on
            the device of ``q``; gradients flow into it, so a model can train
            its angles (J. Su's suggestion for VO-RoPE, and what LRU does).
            None: the spec's fixed frequencies and their cached tables.
        local: restrict each query to nearby keys (a :class:`Local` window or
            chunk, by position as the causal mask is), on top of the causal
            mask. None: every key the causal mask allows.
        key_mask: ``(B, T_k)`` boolean or 0/1 integer tensor, True (1) for the
            keys to attend to and False (0) for padding: Hugging Face's
            ``attention_mask``. Combined with every other mask.
        attn_mask: broadcastable to ``(B, H, T_q, T_k)``: boolean (True: may
            attend) or floating (added to the logits; ``-inf`` masks), as
            ``scaled_dot_product_attention`` reads it. Combined with every
            other mask. A query that ``key_mask`` and ``attn_mask`` leave
            without a key gets output 0 and weights 0.
        sinks: attention sinks ``(H,)``, one learned logit per query head
            (gpt-oss): each row's softmax runs over its keys and the sink,
            whose share is then dropped, so a head can give its keys less
            than all of its weight. The weights path computes them (the
            fused kernel has no sinks); gradients flow into them.

    Returns:
        The output ``(B, H, T_q, Dv)``, and with ``return_weights`` the
        weights ``(B, H, T_q, T_k)`` whose rows sum to one (to less than one
        with ``sinks``: the rest is the sink's).

    Raises:
        TypeError: for a string passed as ``rope`` (the placement is
            ``placement=``), or a ``rope`` that is not a spec.
        ValueError: for shapes that do not fit (a spec's ``dim`` included),
            ``positions`` given with ``q_positions`` or ``k_positions`` (or
            with ``T_q != T_k``), and a causal query that would see no key.
    """
    _check_qkv(q, k, v)
    if sinks is not None:
        _check_sinks(sinks, q.shape[1], q.device)
    rotary = _Rotary.checked(
        placement, rope, q.shape, k.shape, v.shape[-1], q.device,
        positions, q_positions, k_positions, theta,
    )  # fmt: skip
    q_len, k_len, heads = q.shape[-2], k.shape[-2], q.shape[1]
    mask = None  # None: the usual lower triangle, or no mask at all
    if causal and (q_len != k_len or rotary.by_position or local is not None):
        mask = rotary.visible(q_len, k_len, heads, q.device)
    if local is not None:
        if not isinstance(local, Local):
            raise TypeError(f"local must be a Local window or chunk, got {type(local).__name__}")
        near = rotary.near(local, q_len, k_len, heads, q.device)
        mask = near if mask is None else mask & near
    if mask is not None and not bool(mask.any(-1).all()):
        raise ValueError(
            "a query that sees no key (every key sits after it"
            + (f", or outside its {local.kind} of {local.size}" if local is not None else "")
            + f"): T_q = {q_len} queries against T_k = {k_len} keys"
            + (", with the positions given" if rotary.by_position else "")
            + "; its output would be undefined"
        )
    given = _given_mask(key_mask, attn_mask, q.shape[0], heads, q_len, k_len, q.device)
    dead = None  # (B|1, H|1, T_q): queries the given masks leave without a key
    if given is not None:
        if mask is None and causal:
            mask = rotary.visible(q_len, k_len, heads, q.device)
        mask, dead = _merged(mask, given)
    q, k, v = rotary.inputs(q, k, v)
    if mask is not None and mask.is_floating_point():
        mask = mask.to(q.dtype)
    if return_weights or sinks is not None:
        k, v = _repeat_heads(k, v, heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T_q, T_k)
        if mask is not None and mask.is_floating_point():
            scores = scores + mask
        elif mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        elif causal:
            seq_len = q.shape[-2]
            future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if sinks is None:
            weights = scores.softmax(dim=-1)
        else:  # one more logit per row, the head's sink, whose share is dropped
            sink = sinks.to(scores.dtype).view(1, heads, 1, 1).expand(*scores.shape[:-1], 1)
            weights = torch.cat([scores, sink], dim=-1).softmax(dim=-1)[..., :-1]
        if dead is not None:
            weights = weights.masked_fill(dead[..., None], 0.0)
        out = weights @ v  # (B, H, T_q, Dv)
    else:
        out = _attend(q, k, v, mask, causal and mask is None)
        if dead is not None:
            out = out.masked_fill(dead[..., None], 0.0)
    out = rotary.output(out)
    return (out, weights) if return_weights else out


def _check_sinks(sinks: torch.Tensor, heads: int, device: torch.device) -> None:
    if not isinstance(sinks, torch.Tensor) or not sinks.is_floating_point():
        raise TypeError("sinks must be a floating tensor (H,), one logit per query head")
    if tuple(sinks.shape) != (heads,):
        raise ValueError(f"sinks must have shape (H,) = ({heads},), got {tuple(sinks.shape)}")
    if sinks.device != device:
        raise ValueError(f"sinks are on {sinks.device}, the queries on {device}")
    if not bool(torch.isfinite(sinks).all()):
        raise ValueError("sinks must be finite")


def _given_mask(
    key_mask: torch.Tensor | None,
    attn_mask: torch.Tensor | None,
    batch: int,
    heads: int,
    q_len: int,
    k_len: int,
    device: torch.device,
) -> torch.Tensor | None:
    """``key_mask`` and ``attn_mask`` checked and combined: None, a boolean mask or an
    additive float64 one, broadcastable to ``(B, H, T_q, T_k)``."""
    combined: torch.Tensor | None = None
    if key_mask is not None:
        if not isinstance(key_mask, torch.Tensor) or key_mask.is_floating_point():
            raise TypeError("key_mask must be a boolean or 0/1 integer tensor (B, T_k)")
        if tuple(key_mask.shape) != (batch, k_len):
            raise ValueError(
                f"key_mask must have shape (B, T_k) = ({batch}, {k_len}), "
                f"got {tuple(key_mask.shape)}"
            )
        if key_mask.dtype != torch.bool:
            if not bool(((key_mask == 0) | (key_mask == 1)).all()):
                raise ValueError("an integer key_mask must hold only 0 (padding) and 1")
            key_mask = key_mask == 1
        combined = key_mask.to(device)[:, None, None, :]  # (B, 1, 1, T_k)
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise TypeError(f"attn_mask must be a torch.Tensor, got {type(attn_mask).__name__}")
        if attn_mask.dtype != torch.bool and not attn_mask.is_floating_point():
            raise TypeError(
                f"attn_mask must be boolean or floating (additive), got {attn_mask.dtype}"
            )
        try:
            torch.broadcast_shapes(attn_mask.shape, (batch, heads, q_len, k_len))
        except RuntimeError:
            raise ValueError(
                f"attn_mask {tuple(attn_mask.shape)} does not broadcast to (B, H, T_q, T_k) = "
                f"{(batch, heads, q_len, k_len)}"
            ) from None
        if attn_mask.is_floating_point() and bool(attn_mask.isnan().any()):
            raise ValueError("attn_mask holds NaN")
        attn_mask = attn_mask.to(device)
        combined = attn_mask if combined is None else _combined(combined, attn_mask)
    return combined


def _combined(mask: torch.Tensor | None, given: torch.Tensor) -> torch.Tensor:
    """A boolean ``mask`` (or None) and a boolean or additive ``given`` mask as one."""
    if given.dtype == torch.bool:
        return given if mask is None else mask & given
    additive = given.double()
    return additive if mask is None else torch.where(mask, additive, -math.inf)


def _merged(
    mask: torch.Tensor | None, given: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``mask`` (boolean, or None) and a given mask (boolean or additive) as one, and the
    queries left without a key, whose rows are opened so that no softmax sees only
    ``-inf`` (their outputs are set to 0 afterwards)."""
    merged = _combined(mask, given)
    alive = merged.any(-1) if merged.dtype == torch.bool else (merged > -math.inf).any(-1)
    if bool(alive.all()):
        return merged, None
    dead = ~alive
    if merged.dtype == torch.bool:
        return merged | dead[..., None], dead
    return merged.masked_fill(dead[..., None], 0.0), dead
