"""A source folder full of hostile files: the whole pipeline completes and uses every good image."""

from __future__ import annotations

import json

import polars as pl
import pytest

from linefuse.data.readers import EmbeddedPairs

from conftest import LEVELS, run_cli, tiny_params, write_params
from test_index import KEPT, make_hostile_folder


@pytest.mark.slow
def test_the_whole_pipeline_runs_on_a_hostile_folder(tmp_path):
    expected_rejects = make_hostile_folder(tmp_path / "photos")
    params = tiny_params()
    params["data"]["source_dir"] = str(tmp_path / "photos")
    params["pretrain"]["steps"] = 4
    for level in params["train"]["curriculum"].values():
        level["steps"] = 2
    params["eval"].update(steps=1, max_samples=1)
    params["eval"]["sweep"]["steps"] = [1]
    write_params(tmp_path, params)

    commands = [["index"]] + [
        [stage, "--level", level] for stage in ("shard", "embed") for level in LEVELS
    ]
    commands += [["pretrain"]] + [["train", "--level", level] for level in LEVELS]
    commands += [["train-domains"], ["evaluate"]]
    for command in commands:
        assert run_cli(tmp_path, *command) == 0, command

    rejects = pl.read_parquet(tmp_path / "data/index/rejects.parquet")
    assert dict(zip(rejects["path"], rejects["reason"], strict=True)) == expected_rejects
    images = pl.read_parquet(tmp_path / "data/index/images.parquet")
    assert sorted(images["path"]) == KEPT
    split_of = dict(zip(images["id"], images["split"], strict=True))
    for level in LEVELS:
        manifest = pl.read_parquet(tmp_path / "data/shards" / level / "manifest.parquet")
        assert set(manifest["image_id"]) == set(split_of), level  # every good image, every level
        trained = {
            key.split("_")[0]
            for key in EmbeddedPairs(tmp_path / "data/embeddings" / level, "train").keys
        }
        assert trained == {i for i, split in split_of.items() if split == "train"}, level
    report = json.loads((tmp_path / "reports/eval_detail.json").read_text())
    tested = sum(split == "test" for split in split_of.values())
    cells = sum(len(by_level) for by_level in report["psnr"].values())
    assert cells == (len(LEVELS) * len(params["degrade"]["domains"]) if tested else 0)
