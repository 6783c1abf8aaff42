"""Porting a model between the interleaved and half layouts, and the bug of not doing it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from helpers import attention_of

from rope_lessons.rope.forms import layout_permutation
from rope_lessons.rope.spec import Rope
from rope_lessons.toy.layouts import convert_layout, head_permutation
from rope_lessons.toy.model import ModelConfig, TinyTransformer
from rope_lessons.toy.rotary_attention import PLACEMENTS, Placement


def tiny_model(**fields: object) -> TinyTransformer:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=11, dim=32, n_layers=2, n_heads=2, **fields)  # type: ignore[arg-type]
    return TinyTransformer(config).double()


def tokens() -> torch.Tensor:
    return torch.randint(0, 11, (3, 24), generator=torch.Generator().manual_seed(1))


def test_head_permutation_applies_the_layout_permutation_in_every_head() -> None:
    perm = head_permutation(2, 4)
    assert perm.tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    back = head_permutation(2, 4, to="interleaved")
    assert torch.equal(perm[back], torch.arange(8))
    assert torch.equal(head_permutation(1, 8), layout_permutation(8))


@pytest.mark.parametrize("rope", PLACEMENTS)
@pytest.mark.parametrize("causal", [False, True])
def test_converted_model_computes_the_same_function(rope: Placement, causal: bool) -> None:
    model = tiny_model(placement=rope, causal=causal)
    converted = convert_layout(model, "half")
    assert converted.config.rope is not None and converted.config.rope.layout == "half"
    assert all(
        attention_of(converted, i).config.rope == converted.config.rope
        for i in range(len(converted.blocks))
    )
    torch.testing.assert_close(converted(tokens()), model(tokens()), rtol=1e-10, atol=1e-10)
    restored = convert_layout(converted, "interleaved")
    for (name, before), after in zip(
        model.state_dict().items(), restored.state_dict().values(), strict=True
    ):
        assert torch.equal(before, after), name


@pytest.mark.parametrize("rope", [p for p in PLACEMENTS if p != "nope"])
def test_loading_weights_into_the_other_layout_changes_the_output(rope: Placement) -> None:
    """The porting bug: same weights, other layout, no error, different function."""
    model = tiny_model(placement=rope)
    mixed = tiny_model(placement=rope, rope=Rope(16, layout="half"))
    mixed.load_state_dict(model.state_dict())
    difference = (mixed(tokens()) - model(tokens())).abs().max()
    assert difference > 1e-3


def test_half_to_interleaved_conversion_also_works() -> None:
    model = tiny_model(rope=Rope(16, layout="half"))
    converted = convert_layout(model, "interleaved")
    torch.testing.assert_close(converted(tokens()), model(tokens()), rtol=1e-10, atol=1e-10)


def test_conversion_leaves_the_original_alone_and_same_layout_is_a_copy() -> None:
    model = tiny_model()
    before = {name: t.clone() for name, t in model.state_dict().items()}
    convert_layout(model, "half")
    assert all(torch.equal(before[name], t) for name, t in model.state_dict().items())
    copy = convert_layout(model, "interleaved")
    assert copy is not model
    torch.testing.assert_close(copy(tokens()), model(tokens()), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        # deliberately ill-typed: the runtime check is under test
        (lambda: convert_layout(torch.nn.Linear(2, 2), "half"), TypeError, "TinyTransformer"),  # type: ignore[arg-type]
        # deliberately ill-typed: the runtime check is under test
        (lambda: convert_layout(tiny_model(), "neox"), ValueError, "layout"),  # type: ignore[arg-type]
        (lambda: head_permutation(0, 4), ValueError, "n_heads"),
        (lambda: head_permutation(2, 5), ValueError, "dim"),
    ],
)
def test_bad_input_names_the_argument(
    call: Callable[[], object], error: type[Exception], word: str
) -> None:
    with pytest.raises(error, match=word):
        call()


def test_converting_grouped_or_shared_key_values_is_refused() -> None:
    for kv_heads, shared_kv in ((1, False), (2, True)):
        config = ModelConfig(vocab_size=5, n_heads=4, kv_heads=kv_heads, shared_kv=shared_kv)
        model = config.build()
        with pytest.raises(ValueError, match="separate query, key and value heads"):
            convert_layout(model, "half")
