"""Chapter 10's published configurations: stored with their sources, read in the course's terms.

The records are the released models' own values; these tests check that each
loads into its family's transformers configuration, that the readings of
:mod:`rope_lessons.real.published` and :mod:`rope_lessons.real.production` agree with
closed forms (a safe distance is the factor times the trained arc, a critical
pair is chapter 8's), and that the chapter's page shows the tables the data
give.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rope_lessons.real.production import (
    DESIGN_COLUMNS,
    LAYOUTS,
    cached_features,
    compressed_features,
    design_row,
    design_table,
    layer_type,
)
from rope_lessons.real.published import (
    FEATURED,
    PUBLISHED_DIR,
    Reach,
    load_published,
    published_config,
    published_names,
    reach,
)
from rope_lessons.rope.scaling import critical_pair

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "book" / "10_production_models.md"


@pytest.mark.parametrize("name", published_names())
def test_every_record_says_where_it_was_read_and_loads(name: str) -> None:
    record = load_published(name)
    assert record.model_type in LAYOUTS
    assert record.source.get("url", "").startswith("https://")
    assert record.source.get("kind")
    raw = json.loads((PUBLISHED_DIR / f"{name}.json").read_text())
    assert raw["read_with"] == "transformers 5.23.0"
    provenance = (PUBLISHED_DIR / "PROVENANCE.md").read_text()
    assert f"## {name}.json: {record.model_id}" in provenance
    config = published_config(name)
    assert config.model_type == record.model_type
    for field in ("num_hidden_layers", "max_position_embeddings"):
        if field in record.fields:  # the configuration keeps what was published
            assert getattr(config, field) == record.fields[field]


def test_the_tables_models_are_stored_and_unknown_names_refused() -> None:
    assert set(FEATURED) <= set(published_names())
    with pytest.raises(ValueError, match="no published configuration 'mystery'"):
        load_published("mystery")


def _reach(name: str) -> dict[str, Reach]:
    return {r.layer_type: r for r in reach(published_config(name))}


def test_yarn_keeps_every_pair_on_trained_angles_to_the_factor_times_the_arc() -> None:
    """Interpolating by s keeps an arc trained over L - 1 steps up to s (L - 1)."""
    for name, kind, factor, length in (
        ("gpt_oss_120b", "full_attention", 32, 4096),
        ("deepseek_v3", "full_attention", 40, 4096),
        ("deepseek_v4_flash", "compressed_sparse_attention", 16, 65536),
    ):
        r = _reach(name)[kind]
        assert r.extension == "yarn" and r.pretrained_length == length
        assert r.safe_distance == factor * (length - 1)
        assert not r.safe  # a few positions short of the context
    sliding = _reach("gpt_oss_120b")["sliding_attention"]
    assert sliding.reads == 127 and sliding.safe


def test_llama4_scouts_step_divides_from_the_critical_pair_and_chunks_stay_inside() -> None:
    r = _reach("llama4_scout_17b_16e")["chunked_attention"]
    assert r.critical_pair == critical_pair(128, 8192, 5e5) == 35
    ratio = r.trained.theta / r.spec.theta
    assert torch.equal(ratio[:35], torch.ones(35, dtype=ratio.dtype))
    torch.testing.assert_close(ratio[35:], torch.full((29,), 16.0, dtype=ratio.dtype))
    assert r.reads == 8191 and r.safe


def test_critical_pairs_are_chapter_8s() -> None:
    smollm2 = _reach("smollm2_135m")["full_attention"]
    assert smollm2.critical_pair == critical_pair(64, 8192, 1e5) == 20
    smollm3 = _reach("smollm3_3b")["full_attention"]
    assert smollm3.critical_pair == critical_pair(128, 65536, 5e6) == 39
    assert round(smollm2.full_fraction, 2) == 0.62
    assert round(smollm3.full_fraction, 2) == 0.61


def test_gemma4_full_layers_keep_a_quarter_of_the_pairs_all_turning_within_188() -> None:
    full = _reach("gemma4_31b")["full_attention"]
    kept = full.spec.theta[full.spec.theta > 0]
    assert len(kept) == 64 and full.spec.dim == 512
    assert round(2 * math.pi / float(kept.min())) == 188
    assert full.full == full.kept == 64 and math.isinf(full.safe_distance)


def test_the_published_designs_in_words() -> None:
    rows = {name: design_row(published_config(name)) for name in FEATURED}
    assert rows["smollm3_3b"]["NoPE layers"] == "9 of 36: [3, 7, 11, 15, ...]"
    assert rows["qwen3_5_0_8b"]["RoPE"].startswith("base 10,000,000, default, leading 64 of 256")
    assert rows["qwen3_5_0_8b"]["linear-attention layers"] == "18 of 24"
    assert rows["deepseek_v4_flash"]["local layers"] == (
        "43 of 43: window of 128; 21 CSA: 1 entry per 4 positions, an indexer's top 512 read;"
        " 20 HCA: 1 entry per 128 positions, all read"
    )
    assert rows["gemma4_31b"]["multimodal RoPE"] == "none"  # a model that reads images
    assert "llama3 x16" in rows["llama4_scout_17b_16e"]["RoPE"]
    assert rows["gemma4_31b"]["local layers"] == "50 of 60: window of 1024"
    assert "decoupled: 64 features turn beside 128" in rows["deepseek_v3"]["RoPE"]


def _per_type(name: str) -> dict[str, int]:
    config = published_config(name)
    found: dict[str, int] = {}
    for i in range(config.num_hidden_layers):
        kind = layer_type(config, i)
        if kind not in found and kind != "linear_attention":
            found[kind] = cached_features(config, i)
    return found


def test_cached_features_per_position() -> None:
    assert _per_type("deepseek_v4_flash") == dict.fromkeys(
        ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"], 512
    )
    v4 = published_config("deepseek_v4_flash")
    # beyond its window, one 512-wide entry per 4 positions and a 128-wide indexer key per
    # entry in the CSA layers, one 512-wide entry per 128 positions in the HCA layers
    assert [compressed_features(v4, i) for i in (0, 2, 3)] == [0.0, (512 + 128) / 4, 512 / 128]
    # Gemma 4's full layers share one projection for key and value, but the key is turned
    # and the value is not: transformers' cache keeps both tensors
    assert _per_type("gemma4_31b") == {
        "sliding_attention": 16 * 256 * 2,
        "full_attention": 4 * 512 * 2,
    }
    assert _per_type("deepseek_v3") == {"full_attention": 512 + 64}
    assert _per_type("gpt_oss_120b") == dict.fromkeys(["sliding_attention", "full_attention"], 1024)
    with pytest.raises(ValueError, match="keeps a state, not a cache"):
        cached_features(published_config("qwen3_5_0_8b"), 0)


def test_design_table_refuses_what_it_cannot_tabulate() -> None:
    row = design_row(published_config("smollm2_135m"))
    with pytest.raises(ValueError, match="no rows"):
        design_table([], ["layout"])
    with pytest.raises(ValueError, match="1 names for 2 rows"):
        design_table([row, row], ["layout"], ["one"])
    with pytest.raises(ValueError, match="no column 'mystery'"):
        design_table([row], ["mystery"])


def test_the_chapter_page_shows_the_tables_the_data_give() -> None:
    page = PAGE.read_text()
    rows = [design_row(published_config(name)) for name in FEATURED]
    names = [load_published(name).model_id.split("/")[1] for name in FEATURED]
    for columns in DESIGN_COLUMNS.values():
        assert design_table(rows, columns, names) in page
