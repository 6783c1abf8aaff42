"""The README's "Use it in your own experiment" examples run as written (with fewer steps)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from rope_lessons import apply_rope
from rope_lessons.experiments import PairedComparison

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_experiment_examples_run() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Use it in your own experiment", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 3, "the section shows attention, the Rope spec and a training run"
    source = "\n".join(blocks)
    assert "steps=200" in source
    namespace: dict[str, object] = {}
    exec(compile(source.replace("steps=200", "steps=3"), str(README), "exec"), namespace)
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
