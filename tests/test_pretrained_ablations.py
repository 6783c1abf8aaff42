"""Chapter 9's stored ablations over six windows, without the weights: the sets, the
read-back, the checks on the file and the stored result itself.

The stored window that the notebook also measures live is checked against a live
pass in tests/test_pretrained.py (it needs the weights).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rope_lessons.chapters.ablation import quarter_sets
from rope_lessons.evidence.store import content_hash, write_results
from rope_lessons.real import pretrained_ablations as pa


def test_the_sets_are_the_notebooks_quarters_and_random_draws() -> None:
    """The notebook draws its random quarters first from a generator seeded with 0."""
    sets = pa.ablation_sets()
    again = quarter_sets(32, pa.RANDOM_DRAWS, torch.Generator().manual_seed(0))
    assert [s.name for s in sets] == [s.name for s in again]
    assert all(torch.equal(a.drop, b.drop) for a, b in zip(sets, again, strict=True))
    assert [s.name for s in sets[:4]] == ["pairs 0-7", "pairs 8-15", "pairs 16-23", "pairs 24-31"]
    assert all(s.uniform for s in sets)


def _fake_results() -> dict[str, dict[str, object]]:
    """Values that name where they came from: window + set / 100 + reading / 1000."""
    count = len(pa.ablation_sets())
    weights = [[0.5] * 9 for _ in range(30)]
    return {
        str(w): {
            "intact": 4.0 + w,
            "costs": {
                reading: [w + s / 100 + r / 1000 for s in range(count)]
                for r, reading in enumerate(pa.READINGS)
            },
            "first_weight": {"intact": weights, "mean_key pairs 24-31": weights},
            "seconds": 10.0,
            "session": 0,
        }
        for w in range(pa.WINDOWS)
    }


def _write_fake(folder: Path) -> Path:
    path = folder / f"{pa.NAME}.json"
    content = {
        "name": pa.NAME,
        "definition": pa.definition(),
        "sessions": [],
        "results": _fake_results(),
    }
    write_results(path, content)
    return path


def test_costs_are_read_back_by_window_and_draw(tmp_path: Path) -> None:
    _write_fake(tmp_path)
    stored = pa.load_ablations(tmp_path)
    assert stored.complete and stored.seconds == 10.0 * pa.WINDOWS
    torch.testing.assert_close(stored.intact(), 4.0 + torch.arange(6, dtype=torch.float64))
    slow = stored.costs("mean_key_first_kept", "pairs 24-31")  # set 3, reading 3
    assert slow.shape == (pa.WINDOWS, 1)
    assert slow[2, 0] == pytest.approx(2 + 3 / 100 + 3 / 1000)
    drawn = stored.costs("zero", "random quarter")  # sets 4 .. 11, reading 0
    assert drawn.shape == (pa.WINDOWS, pa.RANDOM_DRAWS)
    assert drawn[5].tolist() == pytest.approx([5 + s / 100 for s in range(4, 12)])
    assert stored.first_weight("mean_key pairs 24-31").shape == (pa.WINDOWS, 30, 9)
    with pytest.raises(ValueError, match="reading must be one of"):
        stored.costs("mean", "pairs 0-7")
    with pytest.raises(ValueError, match="no set named"):
        stored.costs("zero", "pairs 0-8")


def test_stored_results_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_fake(tmp_path)
    pa.run(results_dir=tmp_path)  # would load the model if a window were missing
    assert f"complete ({pa.WINDOWS} windows)" in capsys.readouterr().out
    content = json.loads(path.read_text())
    content["results"]["0"]["intact"] = 1.0
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="sha256"):
        pa.load_ablations(tmp_path)
    content["definition"]["width"] = 256
    content["sha256"] = content_hash(content)
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="another definition"):
        pa.load_ablations(tmp_path)
    with pytest.raises(ValueError, match="another definition"):
        pa.run(results_dir=tmp_path)
    with pytest.raises(
        FileNotFoundError, match=r"python -m rope_lessons\.real\.pretrained_ablations"
    ):
        pa.load_ablations(tmp_path / "empty")


def test_the_stored_result_is_complete_and_plausible() -> None:
    stored = pa.load_ablations()
    assert stored.complete
    intact = stored.intact()
    assert bool(((intact > 2.0) & (intact < 7.0)).all())
    for reading in pa.READINGS:
        for name in set(stored.names):
            if reading in pa.QUARTERS_ONLY and name == "random quarter":
                with pytest.raises(ValueError, match="not measured"):
                    stored.costs(reading, name)
                continue
            assert bool(torch.isfinite(stored.costs(reading, name)).all())
    # the full mean-ablation of a quarter's keys costs at least what keeping the first
    # token's key intact costs, up to the rounding of the stored values
    for name in ("pairs 16-23", "pairs 24-31"):
        full, kept = stored.costs("mean_key", name), stored.costs("mean_key_first_kept", name)
        assert bool((full > kept).all())
    weights = stored.first_weight()
    assert weights.shape == (pa.WINDOWS, 30, 9) and bool(((weights >= 0) & (weights <= 1)).all())
    for session in stored.sessions:
        assert "/" not in session["command"]  # no path of the recording machine
