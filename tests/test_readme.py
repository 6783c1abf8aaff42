"""The README's "Use it in your own experiment" examples run as written (with fewer steps)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from rope_lessons import apply_rope
from rope_lessons.evidence.comparisons import PairedComparison

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_experiment_examples_run() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use it in your own experiment", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 3, "the section shows attention, the Rope spec and a training run"
    source = "\n".join(blocks)
    assert "steps=200" in source
    namespace: dict[str, object] = {}
    quick = source.replace("steps=200", "steps=3, eval_batches=1")  # the code, not the budget
    exec(compile(quick, str(README), "exec"), namespace)
    q_rot = namespace["q_rot"]
    assert isinstance(q_rot, torch.Tensor) and q_rot.shape == (2, 4, 128, 64)
    scores = namespace["scores"]
    assert isinstance(scores, torch.Tensor) and scores.shape == (100,)
    # the spec is the short form with its settings bound
    k_llama, k, positions = namespace["k_llama"], namespace["k"], namespace["positions"]
    assert isinstance(k_llama, torch.Tensor) and isinstance(k, torch.Tensor)
    assert isinstance(positions, torch.Tensor)
    expected = apply_rope(k, positions, base=500_000.0, layout="half")
    assert torch.equal(k_llama, expected)
    step, placed = namespace["step"], namespace["placed"]
    assert isinstance(step, torch.Tensor) and step.shape == (2, 8, 1, 64)
    assert isinstance(placed, torch.Tensor)
    torch.testing.assert_close(placed, step)
    cos = namespace["cos"]  # transformers-shaped tables from a Hugging Face config
    assert isinstance(cos, torch.Tensor) and cos.shape == (2, 128, 64)
    comparison = namespace["comparison"]
    assert isinstance(comparison, PairedComparison) and comparison.seeds == (0, 1)
    assert comparison.metric == "loss at length 128" and comparison.lower_is_better


def test_readme_porting_examples_are_what_transformers_computes() -> None:
    """The "Porting" section's four configurations against transformers' own init
    functions and apply_rotary_pos_emb; the API page includes the same block."""
    import transformers
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.qwen2.modeling_qwen2 import (
        Qwen2RotaryEmbedding,
        apply_rotary_pos_emb,
    )

    from rope_lessons.real.production import quiet_transformers

    text = README.read_text(encoding="utf-8")
    section = text.split("## Porting a Hugging Face configuration", 1)[1].split("\n## ", 1)[0]
    (source,) = re.findall(r"```python\n(.*?)```", section, re.S)
    api = (README.parent / "book" / "api" / "rope.md").read_text(encoding="utf-8")
    assert ':start-after: "# --- porting: start"' in api and "# --- porting: end" in source
    namespace: dict[str, object] = {}
    exec(compile(source, str(README), "exec"), namespace)
    with quiet_transformers():
        phi3 = transformers.Phi3Config(**_dict(namespace["phi3"]))
        llama = transformers.LlamaConfig(**_dict(namespace["llama31_config"]))
        qwen = transformers.Qwen2Config(**_dict(namespace["qwen_config"]))
    for name, config, rope_type, seq_len in (
        ("phi3_long", phi3, "longrope", 8192),
        ("phi3_short", phi3, "longrope", 4096),
        ("llama31", llama, "llama3", None),
        ("yarn", qwen, "yarn", None),
    ):
        spec = namespace[name]
        theirs, factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
        torch.testing.assert_close(spec.theta, theirs.double(), rtol=5e-6, atol=0.0)  # type: ignore[attr-defined]
        assert abs(spec.attention_factor - factor) < 1e-12  # type: ignore[attr-defined]
    q, positions = namespace["q"], namespace["positions"]
    assert isinstance(q, torch.Tensor) and isinstance(positions, torch.Tensor)
    cos, sin = Qwen2RotaryEmbedding(qwen)(q, positions[None])
    their_q_embed, _ = apply_rotary_pos_emb(q, q, cos, sin)
    torch.testing.assert_close(namespace["q_embed"], their_q_embed, rtol=0.0, atol=2e-2)
    assert f"{namespace['yarn'].attention_factor:.4f}" == "1.1386"  # type: ignore[attr-defined]
    assert f"{namespace['phi3_long'].attention_factor:.4f}" == "1.1902"  # type: ignore[attr-defined]


def _dict(value: object) -> dict[str, Any]:
    assert isinstance(value, dict)
    return value
