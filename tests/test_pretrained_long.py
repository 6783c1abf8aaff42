"""Chapter 9's long-context sweep without the weights: masks, bins, tasks and stored results.

The tests that need SmolLM2's weights (losses past the context, passkey scoring,
YaRN's factor inside the model) are in ``test_pretrained.py``, which loads the
model once.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rope_lessons.evidence.store import content_hash, write_results
from rope_lessons.real import pretrained_sweep as ps
from rope_lessons.real.pretrained_long import binned, passkey_key, window_mask
from rope_lessons.rope.scaling import dynamic_ntk_alpha


@given(
    length=st.integers(1, 40),
    window=st.integers(1, 50),
    sinks=st.integers(0, 10),
)
def test_window_mask_is_the_window_and_the_sinks(length: int, window: int, sinks: int) -> None:
    mask = window_mask(length, window, sinks)
    assert mask.shape == (length, length) and mask.dtype == torch.bool
    for i in range(length):
        for j in range(length):
            assert bool(mask[i, j]) == (j <= i and (i - j < window or j < sinks))


@given(length=st.integers(1, 30), extra=st.integers(0, 5))
def test_a_window_as_long_as_the_sequence_is_the_causal_mask(length: int, extra: int) -> None:
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    assert torch.equal(window_mask(length, length + extra), causal)


def test_window_mask_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="window"):
        window_mask(8, 0)
    with pytest.raises(ValueError, match="sinks"):
        window_mask(8, 4, -1)
    with pytest.raises(TypeError, match="length"):
        window_mask(8.0, 4)  # type: ignore[arg-type]


@given(
    values=st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=60),
    width=st.integers(1, 16),
)
def test_bins_average_back_to_the_mean(values: list[float], width: int) -> None:
    tensor = torch.tensor(values, dtype=torch.float64)
    bins = binned(tensor, width)
    assert len(bins) == math.ceil(len(values) / width)
    sizes = [min(width, len(values) - i * width) for i in range(len(bins))]
    weighted = sum(b * n for b, n in zip(bins, sizes, strict=True)) / len(values)
    assert weighted == pytest.approx(float(tensor.mean()), abs=1e-9)


def test_passkeys_have_five_digits_and_repeat() -> None:
    keys = [passkey_key(seed) for seed in range(200)]
    assert all(10_000 <= key < 100_000 for key in keys)
    assert keys == [passkey_key(seed) for seed in range(200)]
    assert len(set(keys)) > 190


def test_the_readings_are_chapter_8s_specs_at_factor_2() -> None:
    yarn = ps.READINGS["yarn"].rope
    assert yarn is not None
    assert yarn.attention_factor == pytest.approx(1 + 0.1 * math.log(2))
    plain = ps.PLAIN.theta
    pi = ps.READINGS["pi"].rope
    assert pi is not None and torch.allclose(pi.theta, plain / 2)
    for name, alpha in (("ntk", 2.0), ("ntk, alpha=4", 4.0)):
        rope = ps.READINGS[name].rope
        assert rope is not None
        # NTK-aware: the fastest pair is kept, the slowest divided by alpha
        assert rope.theta[0] == pytest.approx(float(plain[0]))
        assert float(plain[-1] / rope.theta[-1]) == pytest.approx(alpha)
    # dynamic NTK reads 12288 tokens with alpha 2 and 16384 with alpha 3
    dynamic = ps.READINGS["dynamic ntk"]
    assert [dynamic_ntk_alpha(2.0, 8192, n) for n in ps.DYNAMIC_LENGTHS] == [2.0, 3.0]
    ntk = ps.READINGS["ntk"].rope
    assert ntk is not None and torch.allclose(dynamic.rope_at(12288).theta, ntk.theta)
    assert torch.equal(dynamic.rope_at(8192).theta, plain)


def test_readings_equal_to_plain_are_not_recomputed() -> None:
    window = ps.READINGS[f"window + {ps.SINKS} sinks"]
    assert window.same_as_plain(8192) and not window.same_as_plain(8193)
    assert ps.READINGS["dynamic ntk"].same_as_plain(8192)
    assert not ps.READINGS["yarn"].same_as_plain(4096)
    keys = [task.key for task in ps.tasks()]
    assert len(keys) == len(set(keys))
    assert "passkey/dynamic ntk/8192/0" not in keys and "passkey/plain/8192/0" in keys
    assert "passkey/dynamic ntk/12288/0" in keys
    text = [task for task in ps.tasks() if task.kind == "text"]
    assert len(text) == ps.DOCUMENTS * (len(ps.READINGS) + 1)  # dynamic NTK reads twice


def _fake_results() -> dict[str, dict[str, object]]:
    """Stored values that name where they came from: bins hold the reading's index."""
    names = list(ps.READINGS)
    results: dict[str, dict[str, object]] = {}
    for task in ps.tasks():
        code = names.index(task.reading) + task.length / 100_000 + task.index / 10
        if task.kind == "text":
            results[task.key] = {"bins": [code] * (task.length // ps.BIN), "seconds": 1.0}
        else:
            results[task.key] = {
                "retrieved": task.reading == "plain",
                "tokens_right": 6,
                "answer_tokens": 6,
                "log_prob": -code,
                "seconds": 2.0,
            }
    return results


def test_dynamic_ntk_is_assembled_from_plain_and_its_two_passes() -> None:
    stored = ps.LongContextResults(_fake_results(), [])
    assert stored.complete
    row = stored.text("dynamic ntk")[1]  # document 1
    dyn = list(ps.READINGS).index("dynamic ntk")  # plain is reading 0
    assert torch.allclose(row[: 8192 // ps.BIN], torch.tensor(0 + 0.16384 + 0.1))
    assert torch.allclose(row[32:48], torch.tensor(dyn + 0.12288 + 0.1))
    assert torch.allclose(row[48:], torch.tensor(dyn + 0.16384 + 0.1))
    assert stored.text("yarn").shape == (ps.DOCUMENTS, ps.LENGTH // ps.BIN)
    # a reading plain by construction gives plain's trial
    assert stored.passkey("dynamic ntk", 8192, 0.5).retrieved
    assert not stored.passkey("dynamic ntk", 12288, 0.5).retrieved
    assert stored.seconds == pytest.approx(
        sum(1.0 if t.kind == "text" else 2.0 for t in ps.tasks())
    )


def _write_fake(folder: Path) -> Path:
    path = folder / f"{ps.NAME}.json"
    content = {
        "name": ps.NAME,
        "definition": ps.definition(),
        "sessions": [],
        "results": _fake_results(),
    }
    write_results(path, content)
    return path


def test_stored_results_are_checked(tmp_path: Path) -> None:
    path = _write_fake(tmp_path)
    assert ps.load_long_context(tmp_path).complete
    content = json.loads(path.read_text())
    content["results"]["passkey/plain/4096/0"]["retrieved"] = False
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="sha256"):
        ps.load_long_context(tmp_path)
    content["definition"]["bin"] = 128
    content["sha256"] = content_hash(content)
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="another definition"):
        ps.load_long_context(tmp_path)
    with pytest.raises(ValueError, match="another definition"):
        ps.run(results_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"python -m rope_lessons\.real\.pretrained_sweep"):
        ps.load_long_context(tmp_path / "empty")


def test_a_complete_sweep_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_fake(tmp_path)
    ps.run(results_dir=tmp_path)  # would load the model if anything were missing
    assert "complete (75 tasks)" in capsys.readouterr().out


def test_the_stored_sweep_is_complete_and_plausible() -> None:
    stored = ps.load_long_context()
    assert stored.complete
    for name in ps.READINGS:
        bins = stored.text(name)
        assert bins.shape == (ps.DOCUMENTS, ps.LENGTH // ps.BIN)
        assert bool(torch.isfinite(bins).all()) and bool((bins > 0).all())
    # Inside the context a reading that is plain by construction stores plain's numbers,
    # and the window is plain RoPE on every position it can see whole.
    window = stored.text(f"window + {ps.SINKS} sinks")
    torch.testing.assert_close(window[:, : 8192 // ps.BIN], stored.text("plain")[:, :32])
    for session in stored.sessions:
        assert "/" not in session["command"]  # no path of the recording machine


def test_frequency_tables_recomputed_elsewhere_still_match(tmp_path: Path) -> None:
    path = _write_fake(tmp_path)
    content = json.loads(path.read_text())
    table = content["definition"]["readings"]["yarn"]["rope"]
    key = next(k for k, v in table.items() if isinstance(v, list))
    table[key][-1] *= 1 + 1e-12  # last-bit rounding of another instruction set
    write_results(path, content)
    assert ps.load_long_context(tmp_path).complete
    table[key][-1] *= 1 + 1e-6  # a different table
    write_results(path, content)
    with pytest.raises(ValueError, match="another definition"):
        ps.load_long_context(tmp_path)
