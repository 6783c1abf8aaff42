"""The toy transformer: config checks, shapes for every encoding, and that it learns."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import torch

from rope_lessons.evidence.runtime import seed_everything
from rope_lessons.evidence.training import evaluate, train
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.model import POSITION_KINDS, Block, ModelConfig, PositionKind, TinyTransformer
from rope_lessons.toy.rotary_attention import PLACEMENTS, Placement
from rope_lessons.toy.synthetic import WhichFirst, batch_sampler


@pytest.mark.parametrize("position", POSITION_KINDS)
def test_every_position_kind_runs(position: PositionKind) -> None:
    model = TinyTransformer(ModelConfig(vocab_size=11, dim=16, n_heads=2, position=position))
    tokens = torch.randint(0, 11, (3, 9))
    assert model(tokens).shape == (3, 9, 11)


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_every_placement_runs_and_returns_attention_maps(placement: Placement) -> None:
    config = ModelConfig(vocab_size=5, dim=16, n_heads=2, n_layers=3, placement=placement)
    model = TinyTransformer(config)
    logits, maps = model.attention_maps(torch.randint(0, 5, (2, 6)))
    assert logits.shape == (2, 6, 5)
    assert len(maps) == 3 and maps[0].shape == (2, 2, 6, 6)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, 2, 6))


def test_rope_model_is_shift_invariant_and_position_argument_is_used() -> None:
    model = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2, placement="qk"))
    tokens = torch.randint(0, 5, (2, 6))
    out = model(tokens)
    torch.testing.assert_close(model(tokens, torch.arange(6) + 100), out, rtol=1e-4, atol=1e-4)
    absolute = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2, placement="q"))
    assert (absolute(tokens, torch.arange(6) + 100) - absolute(tokens)).abs().max() > 1e-3


def test_learned_table_refuses_longer_sequences() -> None:
    model = TinyTransformer(
        ModelConfig(vocab_size=5, dim=16, n_heads=2, position="learned", max_len=8)
    )
    with pytest.raises(ValueError, match="learned table has 8 rows"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_tokens_must_be_integer_batches() -> None:
    model = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2))
    with pytest.raises(TypeError, match="tokens must be an integer tensor"):
        model(torch.zeros(2, 3))


@pytest.mark.parametrize(
    ("kwargs", "error", "word"),
    [
        ({"dim": 30, "n_heads": 4}, ValueError, "dim / n_heads must be an even"),
        ({"dim": 12, "n_heads": 4}, ValueError, "dim / n_heads must be an even"),
        ({"position": "alibi"}, ValueError, "position must be one of"),
        ({"placement": "kv"}, ValueError, "placement must be one of"),
        ({"rope": "qk"}, TypeError, "placement="),
        ({"rope": 10000.0}, TypeError, "Rope spec"),
        ({"vocab_size": 0}, ValueError, "vocab_size"),
        ({"n_layers": 2.0}, TypeError, "n_layers"),
    ],
)
def test_bad_config_names_the_field(
    kwargs: dict[str, Any], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        ModelConfig(**({"vocab_size": 5} | kwargs))


def test_loss_goes_down_on_a_synthetic_task_in_a_few_steps() -> None:
    seed_everything(0)
    task = WhichFirst()
    model = TinyTransformer(ModelConfig(vocab_size=task.vocab_size, dim=32, n_heads=2))
    before = evaluate(model, batch_sampler(task, 128, 12, seed=1), batches=2)
    result = train(model, batch_sampler(task, 32, 12, seed=0), steps=60, progress=False)
    after = evaluate(model, batch_sampler(task, 128, 12, seed=1), batches=2)
    assert len(result.losses) == 60 and result.wall_seconds > 0
    assert after.loss < 0.5 * before.loss
    assert after.accuracy > 0.9


def test_config_holds_one_spec_and_refuses_what_does_not_fit() -> None:
    assert ModelConfig(vocab_size=5, dim=16, n_heads=2).rope == Rope(8)
    assert ModelConfig(vocab_size=5, dim=16, n_heads=2, position="none").rope is None
    with pytest.raises(ValueError, match=r"dimension 16.*D = dim / n_heads = 8"):
        ModelConfig(vocab_size=5, dim=16, n_heads=2, rope=Rope(16))
    # the old meaning of rope= (the placement) is refused, not read as a spec
    with pytest.raises(TypeError, match="placement="):
        ModelConfig(vocab_size=5, dim=16, n_heads=2, rope="vo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rope only apply with position='rope'"):
        ModelConfig(vocab_size=5, dim=16, n_heads=2, position="none", rope=Rope(8))
    with pytest.raises(ValueError, match="placement only apply"):
        ModelConfig(vocab_size=5, dim=16, n_heads=2, position="learned", placement="vo")
    with pytest.raises(TypeError, match="unexpected keyword argument 'rope_base'"):
        ModelConfig(vocab_size=5, rope_base=500.0)  # type: ignore[call-arg]


def test_config_description_is_json_and_names_the_frequencies() -> None:
    spec = Rope(8, base=100.0, p=0.5)
    described = ModelConfig(vocab_size=5, dim=16, n_heads=2, rope=spec).describe()
    assert json.loads(json.dumps(described)) == described
    assert described["rope"]["theta"] == spec.theta.tolist()
    assert (described["rope"]["base"], described["rope"]["p"]) == (100.0, 0.5)
    custom = ModelConfig(vocab_size=5, dim=16, n_heads=2, rope=Rope.from_theta(spec.theta))
    assert custom.describe()["rope"]["base"] is None
    assert custom == ModelConfig(vocab_size=5, dim=16, n_heads=2, rope=spec)  # same frequencies


def test_the_specs_attention_factor_reaches_the_model() -> None:
    # YaRN trained from scratch keeps its factor a: with RoPE on q and k, the model
    # equals the same weights with W_q and W_k scaled by a (the rotation is linear)
    torch.manual_seed(0)
    spec = Rope(8, base=100.0)
    scaled_spec = Rope.from_theta(spec.theta, attention_factor=1.3)
    plain = TinyTransformer(ModelConfig(vocab_size=7, dim=16, n_heads=2, rope=spec))
    scaled = TinyTransformer(ModelConfig(vocab_size=7, dim=16, n_heads=2, rope=scaled_spec))
    scaled.load_state_dict(plain.state_dict())
    with torch.no_grad():
        for block in plain.blocks:
            assert isinstance(block, Block)
            block.attn.qkv.weight[: 2 * 16] *= 1.3  # rows of W_q and W_k
    tokens = torch.randint(0, 7, (2, 9))
    torch.testing.assert_close(scaled(tokens), plain(tokens), rtol=1e-5, atol=1e-5)
    unscaled = TinyTransformer(ModelConfig(vocab_size=7, dim=16, n_heads=2, rope=spec))
    unscaled.load_state_dict(scaled.state_dict())
    assert (unscaled(tokens) - scaled(tokens)).abs().max() > 1e-3  # the factor is not ignored


def _copy_with_separate_heads(model: TinyTransformer) -> TinyTransformer:
    """A multi-head model with separate keys and values that computes what ``model``
    (grouped-query, multi-query or shared K = V) computes: each key-value head's rows
    repeated for the query heads that share it, and a shared vector used as both."""
    config = model.config
    separate = dataclasses.replace(config, kv_heads=config.n_heads, shared_kv=False).build()
    state = model.state_dict()
    group, width, d = config.n_heads // config.key_value_heads, config.dim, config.head_dim
    for name, weight in state.items():
        if name.endswith("attn.qkv.weight"):
            kv = weight[width:].unflatten(
                0, (-1, config.key_value_heads, d)
            )  # (1 or 2, H_kv, D, C)
            k, v = kv[0], kv[-1]
            state[name] = torch.cat(
                [weight[:width], *(t.repeat_interleave(group, dim=0).flatten(0, 1) for t in (k, v))]
            )
    separate.load_state_dict(state)
    return separate


@pytest.mark.parametrize(
    ("kv_heads", "shared_kv", "placement"),
    [(1, False, "qk"), (2, False, "qkvo"), (1, True, "qk"), (1, True, "qkvo"), (4, True, "vo"),
     (2, True, "nope")],
)  # fmt: skip
def test_shared_and_grouped_key_values_equal_multi_head_with_tied_rows(
    kv_heads: int, shared_kv: bool, placement: Placement
) -> None:
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=7, dim=32, n_heads=4, kv_heads=kv_heads, shared_kv=shared_kv,
        placement=placement,
    )  # fmt: skip
    model = config.build()
    tokens = torch.randint(0, 7, (2, 11))
    q, k, v = model.layer_qkv(tokens)[0]
    assert q.shape == (2, 4, 11, 8) and k.shape == v.shape == (2, kv_heads, 11, 8)
    assert torch.equal(k, v) == shared_kv
    expected = _copy_with_separate_heads(model)(tokens)
    torch.testing.assert_close(model(tokens), expected, atol=1e-5, rtol=1e-5)


def test_a_shared_vector_changes_the_model_when_it_must() -> None:
    # The check above could pass with a projection that ignored shared_kv; a model
    # with separate key and value rows must differ from its tied copy.
    torch.manual_seed(0)
    model = ModelConfig(vocab_size=7, dim=32, n_heads=4, kv_heads=1).build()
    state = model.state_dict()
    tied = ModelConfig(vocab_size=7, dim=32, n_heads=4, kv_heads=1, shared_kv=True).build()
    for name in tied.state_dict():
        source = state[name]
        state[name] = source[: 32 + 8] if name.endswith("attn.qkv.weight") else source
    tied.load_state_dict({name: state[name] for name in tied.state_dict()})
    tokens = torch.randint(0, 7, (2, 11))
    assert not torch.allclose(model(tokens), tied(tokens), atol=1e-3)


@pytest.mark.parametrize("placement", ["qk", "qkvo"])
def test_one_shared_vector_per_token_stays_relative(placement: Placement) -> None:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=7, dim=32, n_heads=4, kv_heads=1, shared_kv=True,
                         placement=placement)  # fmt: skip
    model = config.build()
    tokens = torch.randint(0, 7, (2, 10))
    shifted = model(tokens, positions=torch.arange(10) + 37)
    torch.testing.assert_close(model(tokens), shifted, atol=1e-4, rtol=1e-4)


def test_cached_vectors_and_the_description_of_key_value_heads() -> None:
    counts = {
        (None, False): 8, (2, False): 4, (1, False): 2, (1, True): 1, (4, True): 4,
    }  # fmt: skip
    for (kv_heads, shared), expected in counts.items():
        config = ModelConfig(vocab_size=5, n_heads=4, kv_heads=kv_heads, shared_kv=shared)
        assert config.cached_vectors == expected
        described = config.describe()
        assert ("kv_heads" in described) == (kv_heads not in (None, 4) or shared)
    assert ModelConfig(vocab_size=5).kv_heads == 4
    assert ModelConfig(vocab_size=5, kv_heads=1, shared_kv=True).describe()["shared_kv"] is True


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"kv_heads": 3}, "kv_heads must divide n_heads"), ({"kv_heads": 0}, "kv_heads"),
     ({"shared_kv": 1}, "shared_kv must be True or False")],
)  # fmt: skip
def test_bad_key_value_heads_are_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        ModelConfig(vocab_size=5, n_heads=4, **fields)


@pytest.mark.parametrize("placement", ["vo", "qk", "qkvo"])
def test_learned_angles_start_at_the_spec_and_train(placement: Placement) -> None:
    torch.manual_seed(0)
    rope = Rope(8, base=100.0)
    fixed = ModelConfig(vocab_size=7, dim=32, n_heads=4, rope=rope, placement=placement).build()
    learned_config = dataclasses.replace(fixed.config, learned_angles=True)
    learned = learned_config.build()
    missing = learned.load_state_dict(fixed.state_dict(), strict=False).missing_keys
    assert sorted(missing) == [f"blocks.{i}.attn.theta" for i in range(2)]
    tokens = torch.randint(0, 7, (2, 11))
    torch.testing.assert_close(learned(tokens), fixed(tokens), atol=1e-5, rtol=1e-5)
    torch.nn.functional.cross_entropy(learned(tokens).flatten(0, 1), tokens.flatten()).backward()
    for block in learned.blocks:
        assert isinstance(block, Block) and block.attn.theta is not None
        assert block.attn.theta.grad is not None and bool(block.attn.theta.grad.abs().sum() > 0)
    assert learned_config.describe()["learned_angles"] is True
    assert "learned_angles" not in fixed.config.describe()


def test_learned_angles_need_rope() -> None:
    with pytest.raises(ValueError, match="learned_angles only apply with position='rope'"):
        ModelConfig(vocab_size=5, position="none", learned_angles=True)
    nope = ModelConfig(vocab_size=5, placement="nope", learned_angles=True).build()
    assert all(isinstance(b, Block) and b.attn.theta is None for b in nope.blocks)
