r"""RoPE as pure formulas, the bottom layer of the package.

This folder holds RoPE itself, with no model, trainer or chapter around it:
:mod:`~rope_lessons.rope.spec`, the :class:`~rope_lessons.rope.spec.Rope` spec
that holds a RoPE's frequencies, layout, attention factor and rotating slice and
applies them; :mod:`~rope_lessons.rope.ladder`, the frequency ladder (how many
pairs turn, their frequencies, angles, wavelengths and turns);
:mod:`~rope_lessons.rope.kernels`, the kernel (pairs read and written in either
layout, cached cos/sin tables, :func:`~rope_lessons.rope.kernels.apply_rope`, the
score at a distance); :mod:`~rope_lessons.rope.forms`, the teaching forms
(rotation matrix, complex product, loop) and the permutation between the
layouts; :mod:`~rope_lessons.rope.scaling`, chapter 8's context-extension
formulas; :mod:`~rope_lessons.rope.scaled_specs`, an extension method as a spec
and the distances a spec keeps on angles met in training;
:mod:`~rope_lessons.rope.hf_config`, a Hugging Face configuration read into a
spec; :mod:`~rope_lessons.rope.check`,
:func:`~rope_lessons.rope.check.check_rope`, which checks a reader's RoPE and
names its bug; :mod:`~rope_lessons.rope.encodings`, chapter 2's absolute
encodings and their measurements; :mod:`~rope_lessons.rope.mrope`, multimodal
RoPE (positions on several axes); :mod:`~rope_lessons.rope.rope2d`, 2D RoPE for
image patches; :mod:`~rope_lessons.rope.precision`, how precisely a
floating-point format holds positions and angles; and
:mod:`~rope_lessons.rope.general_solution`, the general solution of
:math:`R_m^\top R_n = R_{n-m}`. It imports nothing of the package but
``rope_lessons._checks`` (argument checks and shared ``Literal`` types), and
every other layer may import it.

Reference: J. Su, Y. Lu, S. Pan, A. Murtadha, B. Wen, Y. Liu, "RoFormer:
Enhanced Transformer with Rotary Position Embedding", arXiv:2104.09864
(eq. 34 is the elementwise form used here).

Conventions (the same everywhere in the course):

* positions ``m, n`` are 0-based integers; the head dimension ``d`` is even;
* frequencies :math:`\theta_k = \text{base}^{-2k/d}` for ``k = 0 .. d/2 - 1``;
* position ``m`` turns pair ``k`` counter-clockwise by the angle
  :math:`m\theta_k`: :math:`(x_1, x_2) \mapsto (x_1\cos - x_2\sin,\;
  x_1\sin + x_2\cos)`, so that :math:`R_m^\top R_n = R_{n-m}`;
* layout ``"interleaved"`` pairs dimensions ``(2k, 2k+1)`` (RoFormer, Meta
  Llama, GPT-J); layout ``"half"`` pairs ``(k, k + d/2)`` (GPT-NeoX, Hugging
  Face ``rotate_half``). They differ by
  :func:`~rope_lessons.rope.forms.layout_permutation`;
* a frequency vector ``theta`` (shape ``(d/2,)``, pair 0 fastest) can replace
  ``base`` and ``p`` everywhere: p-RoPE, partial rotary, truncated or
  rescaled spectra are then one argument.

One formula, one kernel: every form reads its frequencies from
:func:`~rope_lessons.rope.ladder.resolve_theta`, its angles from
:func:`~rope_lessons.rope.ladder.rotation_angles` (float64) and turns pairs with
:func:`~rope_lessons.rope.kernels.turn`, except the complex form, whose kernel is
the complex product itself; so the forms cannot drift apart.

Shapes used in the docstrings:

* ``...``: any leading dimensions (batch, heads);
* ``T``: sequence length;
* ``d``: feature (head) dimension, even; ``d/2`` rotation pairs.

Positions and axes, the one place where they are settled:

* features are ``(..., T, d)``: the sequence is the second-to-last axis
  unless ``seq_dim=`` says otherwise. A tensor laid out ``(B, T, H, D)``
  (Hugging Face's layout before its ``transpose(1, 2)``) needs ``seq_dim=1``
  (:func:`~rope_lessons.rope.kernels.apply_rope`,
  :meth:`Rope.apply <rope_lessons.rope.spec.Rope.apply>`) or a transpose.
  Without either it would be read with the *heads* as the sequence (head ``h``
  turned by position ``h``); that is refused where it can be seen, when 2-D
  positions ``(B, T)`` come with it, and cannot be seen otherwise, since every
  shape is a valid ``(..., T, d)``;
* positions broadcast to ``(..., T)`` by NumPy's rules, with one exception
  for attention-shaped features ``(B, H, T, d)``: a 2-D position tensor is
  read as ``(B, T)``, one row per batch element (Hugging Face's
  ``position_ids``), the same as ``positions[:, None, :]``. This holds even
  when ``B == H``; a first dimension that is neither ``B`` nor 1 is refused,
  ``H`` included. Per-head positions are passed 3-D, ``(1, H, T)`` or
  ``(B, H, T)``; ``(T,)`` is shared by every batch element and head.
"""
