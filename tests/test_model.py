"""The toy transformer: config checks, shapes for every encoding, and that it learns."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rope_lessons.attention import PLACEMENTS, Placement
from rope_lessons.model import POSITION_KINDS, ModelConfig, PositionKind, TinyTransformer
from rope_lessons.runtime import seed_everything
from rope_lessons.synthetic import WhichFirst, batch_sampler
from rope_lessons.training import evaluate, train


@pytest.mark.parametrize("position", POSITION_KINDS)
def test_every_position_kind_runs(position: PositionKind) -> None:
    model = TinyTransformer(ModelConfig(vocab_size=11, dim=16, n_heads=2, position=position))
    tokens = torch.randint(0, 11, (3, 9))
    assert model(tokens).shape == (3, 9, 11)


@pytest.mark.parametrize("rope", PLACEMENTS)
def test_every_placement_runs_and_returns_attention_maps(rope: Placement) -> None:
    model = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2, n_layers=3, rope=rope))
    logits, maps = model.attention_maps(torch.randint(0, 5, (2, 6)))
    assert logits.shape == (2, 6, 5)
    assert len(maps) == 3 and maps[0].shape == (2, 2, 6, 6)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(2, 2, 6))


def test_rope_model_is_shift_invariant_and_position_argument_is_used() -> None:
    model = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2, rope="qk"))
    tokens = torch.randint(0, 5, (2, 6))
    out = model(tokens)
    torch.testing.assert_close(model(tokens, torch.arange(6) + 100), out, rtol=1e-4, atol=1e-4)
    absolute = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2, rope="q"))
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
        ({"rope": "kv"}, ValueError, "placement must be one of"),
        ({"rope_layout": "neox"}, ValueError, "layout"),
        ({"rope_p": 1.2}, ValueError, "rope_p"),
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


def test_rope_p_that_rope_theta_overrides_is_refused() -> None:
    theta = (1.0, 0.1, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"rope_p=0\.5 and rope_theta.*overrides"):
        ModelConfig(vocab_size=5, dim=16, n_heads=2, rope_p=0.5, rope_theta=theta)
    ModelConfig(vocab_size=5, dim=16, n_heads=2, rope_p=1.0, rope_theta=theta)


def test_rope_theta_model_runs_whatever_base_it_records() -> None:
    # rope_base beside rope_theta is a record (stored sweeps hold such runs), never used:
    # the model must not hand apply_rope a base that theta overrides
    theta = (1.0, 0.1, 0.0, 0.0)
    seed_everything(0)
    plain = TinyTransformer(ModelConfig(vocab_size=5, dim=16, n_heads=2, rope_theta=theta))
    recorded = TinyTransformer(
        ModelConfig(vocab_size=5, dim=16, n_heads=2, rope_theta=theta, rope_base=100.0)
    )
    recorded.load_state_dict(plain.state_dict())
    tokens = torch.randint(0, 5, (2, 6))
    torch.testing.assert_close(recorded(tokens), plain(tokens), rtol=0, atol=0)
    assert recorded.config.rotary_arguments().base == 10_000.0
