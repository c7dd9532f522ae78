"""embed@LEVEL: pixel mode on the tiny project, latent mode through a tiny random VAE, and the
prompt table through a tiny random CLIP text encoder with an offline byte-level BPE tokenizer."""

from __future__ import annotations

import json
import logging
import pickle
import string
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from safetensors.torch import load_file

from linefuse.data.layout import SHARD_MANIFEST
from linefuse.data.readers import EmbeddedPairs, LmdbPairs, read_manifest
from linefuse.data.shards import Pair, _LevelWriter
from linefuse.data.transforms import normalise
from linefuse.inference.model import load_vae
from linefuse.params.full import parse_params
from linefuse.stage import UserError
from linefuse.train.embed import embed_level, encode_pixels

from conftest import file_digests, tiny_params

LEVEL = "easy"
FP16_ATOL = 1e-3  # float16 rounds a value in [-1, 1] by at most 2**-12 (~2.4e-4)


@pytest.mark.slow  # a fresh interpreter imports torch
def test_pixel_mode_loads_no_model_library():
    """Pixel mode needs torch alone: diffusers and peft, seconds of import in every embed
    process, load only for a VAE."""
    probe = (
        "import sys; from linefuse.train.embed import _PixelEncoder; "
        "assert _PixelEncoder(None, 'cpu').mode == 'pixel'; "
        "print(','.join(m for m in ('diffusers', 'peft') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def level_dir(project: Path, level: str = LEVEL) -> Path:
    return project / "data" / "shards" / level


def index_path(project: Path) -> Path:
    return project / "data" / "index" / "images.parquet"


def params_with(**model) -> object:
    raw = tiny_params()
    raw["model"].update(model)
    return parse_params(raw, "test")


def run_embed(params, project: Path, out: Path, index: Path | None = None) -> dict:
    out.mkdir(parents=True)
    return embed_level(params, LEVEL, level_dir(project), index or index_path(project), out)


def stored_pairs(project: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = LmdbPairs(level_dir(project), split)
    try:
        rows = [pairs[i] for i in range(len(pairs))]
    finally:
        pairs.close()
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


# --- pixel mode --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pixel_runs(tiny_project, tmp_path_factory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("embed_pixel")
    params = params_with()
    metrics = run_embed(params, tiny_project, root / "a")
    run_embed(params, tiny_project, root / "b")
    return root / "a", root / "b", metrics


def test_pixel_mode_layout_and_counts(tiny_project, pixel_runs):
    out, _, metrics = pixel_runs
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "prompts.safetensors",
        "train.safetensors",
        "val.safetensors",
    ]
    assert manifest["mode"] == "pixel" and manifest["dtype"] == "float16"
    assert manifest["channels"] == 3 and manifest["scaling_factor"] == 1.0
    assert manifest["vae"] is None and manifest["text_encoder"] is None
    assert manifest["prompts"] == [""]
    assert set(manifest["splits"]) == {"train", "val"}
    for split, crop in (("train", 32), ("val", 48)):
        shard_rows = read_manifest(level_dir(tiny_project), split)
        entry = manifest["splits"][split]
        assert entry["count"] == shard_rows.height > 0
        assert entry["keys"] == shard_rows["key"].to_list()  # key order
        assert entry["shape"] == [3, crop, crop]
        tensors = load_file(str(out / f"{split}.safetensors"))
        assert sorted(tensors) == ["blurred", "prompt", "sharp"]
        for name in ("blurred", "sharp"):
            assert tensors[name].dtype == torch.float16
            assert tuple(tensors[name].shape) == (entry["count"], 3, crop, crop)
        assert tensors["prompt"].dtype == torch.int64
        assert tensors["prompt"].tolist() == [0] * entry["count"]
    assert metrics["mode"] == "pixel"
    assert metrics["samples"] == {s: manifest["splits"][s]["count"] for s in ("train", "val")}
    assert metrics["bytes"] == sum(p.stat().st_size for p in out.iterdir())


def test_pixel_values_are_normalised_pairs(tiny_project, pixel_runs):
    out = pixel_runs[0]
    for split in ("train", "val"):
        blurred, sharp = stored_pairs(tiny_project, split)
        tensors = load_file(str(out / f"{split}.safetensors"))
        for name, pixels in (("blurred", blurred), ("sharp", sharp)):
            expected = torch.from_numpy(pixels.astype(np.float32) / 127.5 - 1.0).permute(0, 3, 1, 2)
            assert torch.allclose(tensors[name].float(), expected, atol=FP16_ATOL, rtol=0)
    # the helper is the same transform, in float32
    assert torch.allclose(
        normalise(torch.from_numpy(blurred)),
        torch.from_numpy(blurred.astype(np.float32) / 127.5 - 1.0).permute(0, 3, 1, 2),
    )


def test_pixel_prompt_table_is_one_null_embedding(pixel_runs):
    table = load_file(str(pixel_runs[0] / "prompts.safetensors"))
    assert list(table) == ["embeddings"]
    assert table["embeddings"].dtype == torch.float32
    assert tuple(table["embeddings"].shape) == (1, 1, 32)  # tiny UNet's cross_attention_dim
    assert not table["embeddings"].any()


def test_two_runs_are_byte_identical(pixel_runs):
    a, b, _ = pixel_runs
    assert file_digests(a) == file_digests(b)


def test_embedded_pairs_reads_back_float32(pixel_runs):
    out = pixel_runs[0]
    dataset = EmbeddedPairs(out, "train")
    manifest = json.loads((out / "manifest.json").read_text())
    assert len(dataset) == manifest["splits"]["train"]["count"]
    assert dataset.keys == manifest["splits"]["train"]["keys"]
    assert dataset._tensors is None  # nothing loaded until first access
    stored = load_file(str(out / "train.safetensors"))
    for i in (0, len(dataset) - 1):
        blurred, sharp, prompt = dataset[i]
        assert blurred.dtype == sharp.dtype == torch.float32
        assert torch.equal(blurred, stored["blurred"][i].float())
        assert torch.equal(sharp, stored["sharp"][i].float())
        assert prompt == 0 and isinstance(prompt, int)
    # pickles without the loaded tensors (cheap to send to DataLoader workers)
    clone = pickle.loads(pickle.dumps(dataset))
    assert clone._tensors is None and len(pickle.dumps(dataset)) < 100_000
    assert torch.equal(clone[3][1], dataset[3][1])
    table = dataset.prompt_embeddings()
    assert table.dtype == torch.float32 and tuple(table.shape) == (1, 1, 32)
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=4)))
    assert tuple(batch[0].shape) == (4, 3, 32, 32) and batch[2].tolist() == [0, 0, 0, 0]
    with pytest.raises(UserError, match="no test split"):
        EmbeddedPairs(out, "test")


# --- skipped and empty splits ------------------------------------------------------------------


def fake_level(folder: Path, shapes: dict[str, list[tuple[int, int]]]) -> Path:
    """A level dir written by the shard stage's own writer, with chosen sample sizes."""
    folder.mkdir(parents=True)
    writer = _LevelWriter(folder, samples_per_shard=16)
    rng = np.random.default_rng(0)
    for split, sizes in shapes.items():
        for n, (h, w) in enumerate(sizes):
            key = f"{split}{n:03d}_gaussian_000"
            meta = {
                "key": key,
                "image_id": f"{split}{n:03d}",
                "domain": "gaussian",
                "level": LEVEL,
                "split": split,
                "patch": 0,
                "params": {},
            }
            sharp = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            writer.add(Pair(key, meta, 255 - sharp, sharp))
    writer.close().write_parquet(folder / SHARD_MANIFEST)
    return folder


def test_split_with_mixed_sizes_is_skipped_with_a_warning(tmp_path, caplog):
    shards = fake_level(tmp_path / "level", {"train": [(16, 16)] * 3, "val": [(16, 24), (24, 16)]})
    raw = tiny_params()
    raw["embed"]["splits"] = ["train", "val", "test"]
    raw["embed"]["batch_size"] = 2
    out = tmp_path / "out"
    out.mkdir()
    with caplog.at_level(logging.WARNING, logger="linefuse"):
        metrics = embed_level(
            parse_params(raw, "test"), LEVEL, shards, tmp_path / "unused.parquet", out
        )
    assert any(r.levelno == logging.WARNING and "val" in r.getMessage() for r in caplog.records)
    manifest = json.loads((out / "manifest.json").read_text())
    assert list(manifest["splits"]) == ["train"]  # val skipped, test has no samples
    assert not (out / "val.safetensors").exists() and not (out / "test.safetensors").exists()
    assert metrics["skipped"] == ["val"] and metrics["samples"] == {"train": 3}
    train = load_file(str(out / "train.safetensors"))
    assert tuple(train["sharp"].shape) == (3, 3, 16, 16)  # batch_size 2 over 3 samples


# --- latent mode -------------------------------------------------------------------------------

SCALING = 0.5  # not diffusers' default, so a forgotten scale shows


@pytest.fixture(scope="module")
def tiny_vae_dir(tmp_path_factory) -> Path:
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=32,
        scaling_factor=SCALING,
    )
    folder = tmp_path_factory.mktemp("models") / "vae"
    vae.save_pretrained(folder)
    return folder


@pytest.fixture
def one_thread():
    """Small convolutions on a shared box: with several intra-op threads and another busy
    process, each VAE call waits on the thread barrier far longer than it computes; one thread
    never waits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_latent_mode_end_to_end(tiny_project, tiny_vae_dir, tmp_path, one_thread):
    params = params_with(vae=str(tiny_vae_dir))
    metrics = run_embed(params, tiny_project, tmp_path / "a")
    out = tmp_path / "a"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == metrics["mode"] == "latent"
    assert manifest["channels"] == 4 and manifest["scaling_factor"] == SCALING
    assert manifest["vae"] == str(tiny_vae_dir) and "shift_factor" not in manifest
    assert manifest["splits"]["train"]["shape"] == [4, 16, 16]
    assert manifest["splits"]["val"]["shape"] == [4, 24, 24]

    vae = load_vae(str(tiny_vae_dir))
    assert not vae.training and not any(p.requires_grad for p in vae.parameters())
    blurred, sharp = stored_pairs(tiny_project, "train")
    tensors = load_file(str(out / "train.safetensors"))
    n = manifest["splits"]["train"]["count"]
    for name, pixels in (("blurred", blurred), ("sharp", sharp)):
        stored = tensors[name]
        assert stored.dtype == torch.float16 and tuple(stored.shape) == (n, 4, 16, 16)
        latents = encode_pixels(vae, torch.from_numpy(pixels))
        assert latents.dtype == torch.float32
        assert torch.allclose(stored.float(), latents, atol=FP16_ATOL, rtol=1e-3)
        # the posterior mean times the scaling factor, computed without the helper
        with torch.no_grad():
            x = torch.from_numpy(pixels[:8]).permute(0, 3, 1, 2).float() / 127.5 - 1
            mean = vae.encode(x).latent_dist.mean
        assert torch.allclose(latents[:8], mean * SCALING, atol=1e-5)
    # deterministic: a second run writes the same bytes
    run_embed(params, tiny_project, tmp_path / "b")
    assert file_digests(tmp_path / "a") == file_digests(tmp_path / "b")
    # and reads back through the same dataset class
    dataset = EmbeddedPairs(out, "val")
    assert tuple(dataset[0][0].shape) == (4, 24, 24) and dataset[0][0].dtype == torch.float32


# --- text encoder ------------------------------------------------------------------------------

MAX_LENGTH = 12
PROMPT_A, PROMPT_B = "a line chart", "a spectrum plot"


def write_tiny_sd_text_encoder(folder: Path, hidden_size: int = 32) -> Path:
    """tokenizer/ + text_encoder/ in the Stable Diffusion layout, random weights, all offline.

    The tokenizer is CLIP's byte-level BPE over a hand-written vocabulary: the two specials, every
    lowercase letter alone and word-final (with CLIP's '</w>'), and a few merges for 'line'.
    """
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for suffix in ("", "</w>"):
        for letter in string.ascii_lowercase:
            vocab[letter + suffix] = len(vocab)
    merges = ["l i", "li n", "lin e</w>"]
    for merge in merges:
        vocab[merge.replace(" ", "")] = len(vocab)
    source = folder / "bpe"
    source.mkdir(parents=True)
    (source / "vocab.json").write_text(json.dumps(vocab))
    (source / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    tokenizer = CLIPTokenizer(
        vocab=str(source / "vocab.json"),
        merges=str(source / "merges.txt"),
        model_max_length=MAX_LENGTH,
    )
    assert tokenizer.convert_ids_to_tokens(tokenizer("a line")["input_ids"]) == [
        "<|startoftext|>",
        "a</w>",
        "line</w>",
        "<|endoftext|>",
    ]
    tokenizer.save_pretrained(folder / "tokenizer")

    torch.manual_seed(0)
    config = CLIPTextConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=37,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=MAX_LENGTH,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=1,
    )
    CLIPTextModel(config).save_pretrained(folder / "text_encoder")
    return folder


def reference_embedding(folder: Path, prompt: str) -> torch.Tensor:
    from transformers import CLIPTextModel, CLIPTokenizer

    tokenizer = CLIPTokenizer.from_pretrained(folder / "tokenizer")
    encoder = CLIPTextModel.from_pretrained(folder / "text_encoder").eval()
    ids = tokenizer(
        prompt,
        padding="max_length",
        max_length=tokenizer.model_max_length,
        truncation=True,
        return_tensors="pt",
    ).input_ids
    with torch.no_grad():
        return encoder(ids).last_hidden_state[0]


def test_text_encoder_prompt_table(tiny_project, tmp_path, monkeypatch, one_thread):
    from transformers import CLIPTextModel

    sd = write_tiny_sd_text_encoder(tmp_path / "sd")
    # prompts on three train images and one val image; every other image has none
    train_ids = read_manifest(level_dir(tiny_project), "train")["image_id"].unique().sort()
    val_ids = read_manifest(level_dir(tiny_project), "val")["image_id"].unique().sort()
    assert len(train_ids) >= 4 and len(val_ids) >= 1
    chosen = {
        train_ids[0]: PROMPT_A,
        train_ids[1]: PROMPT_B,
        train_ids[2]: PROMPT_A,
        val_ids[0]: PROMPT_B,
    }
    index = pl.read_parquet(index_path(tiny_project))
    index = index.with_columns(pl.col("id").replace_strict(chosen, default="").alias("prompt"))
    index.write_parquet(tmp_path / "images.parquet")

    rows_encoded = []
    forward = CLIPTextModel.forward

    def counting_forward(self, input_ids=None, *args, **kwargs):
        rows_encoded.append(int(input_ids.shape[0]))
        return forward(self, input_ids, *args, **kwargs)

    monkeypatch.setattr(CLIPTextModel, "forward", counting_forward)
    params = params_with(text_encoder=str(sd))
    metrics = run_embed(params, tiny_project, tmp_path / "out", index=tmp_path / "images.parquet")
    monkeypatch.undo()

    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    table = manifest["prompts"]
    assert table == sorted(["", PROMPT_A, PROMPT_B]) and metrics["prompts"] == 3
    assert sum(rows_encoded) == len(table)  # each distinct prompt encoded exactly once
    assert manifest["text_encoder"] == str(sd)
    embeddings = load_file(str(out / "prompts.safetensors"))["embeddings"]
    assert embeddings.dtype == torch.float32 and tuple(embeddings.shape) == (3, MAX_LENGTH, 32)
    for row, prompt in enumerate(table):
        assert torch.allclose(embeddings[row], reference_embedding(sd, prompt), atol=1e-6)
    assert not torch.allclose(embeddings[1], embeddings[2])

    # one table for every level: another level's run writes the same prompts file
    medium = tmp_path / "medium"
    medium.mkdir()
    embed_level(
        params, "medium", level_dir(tiny_project, "medium"), tmp_path / "images.parquet", medium
    )
    assert file_digests(medium)["prompts.safetensors"] == file_digests(out)["prompts.safetensors"]

    for split in ("train", "val"):
        dataset = EmbeddedPairs(out, split)
        image_of = dict(
            read_manifest(level_dir(tiny_project), split).select("key", "image_id").iter_rows()
        )
        seen = set()
        for i, key in enumerate(dataset.keys):
            expected = chosen.get(image_of[key], "")
            assert table[dataset[i][2]] == expected
            seen.add(expected)
        assert seen == ({"", PROMPT_A, PROMPT_B} if split == "train" else {"", PROMPT_B})
        assert torch.equal(dataset.prompt_embeddings(), embeddings)


def test_text_encoder_width_must_match_the_unet(tiny_project, tmp_path):
    sd = write_tiny_sd_text_encoder(tmp_path / "sd", hidden_size=16)
    with pytest.raises(UserError, match="cross_attention_dim is 32"):
        run_embed(params_with(text_encoder=str(sd)), tiny_project, tmp_path / "out")
