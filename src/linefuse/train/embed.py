"""embed@LEVEL: precompute what the frozen parts of the model would recompute every step.

One embeddings directory holds, for each embedded split that has samples,
  {split}.safetensors   'blurred', 'sharp' (N, C, h, w) in embed.dtype; 'prompt' (N,) int64
and, once,
  prompts.safetensors   'embeddings' (P, seq, dim) float32: the prompt table
  manifest.json         mode, dtype, channels, scaling_factor, vae, text_encoder, prompts, splits

Pixel mode (model.vae null) stores the pairs normalised to [-1, 1]; latent mode stores the
AutoencoderKL posterior mean times its scaling factor (the mean, so the output is deterministic).
Prompts come from the index's `prompt` column: the table holds every distinct prompt of the index
and the empty one (restoring conditions on it), sorted, so it is the same for every level; without
a text encoder every sample points at one fixed null embedding of zeros. Rows follow LmdbPairs'
key order, and the files are a pure function of (shards, index, params), so two runs write
byte-identical files.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from tqdm import tqdm

from linefuse.data.layout import EMBEDDINGS_MANIFEST, NULL_PROMPT, PROMPTS, split_file
from linefuse.data.readers import LmdbPairs
from linefuse.data.transforms import normalise
from linefuse.params.embed import EmbedParams
from linefuse.params.model import ModelParams
from linefuse.paths import unet_config
from linefuse.stage import UserError, work_done

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# transformers' stand-in when a tokenizer folder sets no model_max_length
_UNSET_MAX_LENGTH = 1_000_000


def _shift_factor(vae) -> float:
    shift = getattr(vae.config, "shift_factor", None)
    return float(shift) if shift is not None else 0.0


def encode_pixels(vae, pixels_uint8_bhwc: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float32 (B, C, h, w): the VAE's posterior mean, scaled.

    (mean - shift_factor) * scaling_factor; shift_factor is unset (0) for SD 1.x/2.x/XL VAEs and
    set for SD3/Flux ones. The result stays on the VAE's device.
    """
    parameter = next(vae.parameters())
    x = normalise(pixels_uint8_bhwc).to(device=parameter.device, dtype=parameter.dtype)
    with torch.no_grad():
        mean = vae.encode(x).latent_dist.mean
    return (mean.to(torch.float32) - _shift_factor(vae)) * float(vae.config.scaling_factor)


# --- prompts -----------------------------------------------------------------------------------


def _prompts_by_image(index_path: Path) -> dict[str, str]:
    """{image id: prompt} from the index's `prompt` column (a null prompt counts as empty)."""
    import polars as pl

    index = pl.read_parquet(index_path, columns=["id", "prompt"])
    ids, prompts = index["id"].to_list(), index["prompt"].to_list()
    return {i: p or NULL_PROMPT for i, p in zip(ids, prompts, strict=True)}


def _prompt_of_samples(
    prompts: dict[str, str], image_ids: list[str], index_path: Path
) -> list[str]:
    missing = sorted({i for i in image_ids if i not in prompts})
    if missing:
        raise UserError(
            f"{index_path} has no row for image {missing[0]} (and {len(missing) - 1} "
            "more) found in the shards; rerun index and shard"
        )
    return [prompts[i] for i in image_ids]


def _release(module, device: str) -> None:
    """Frees a frozen encoder once its outputs are stored (the caller drops its own name)."""
    if torch.device(device).type != "cpu":
        module.to("cpu")
    del module
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def encode_prompts(
    folder: str,
    prompts: list[str],
    batch_size: int,
    device: str,
    cross_attention_dim: int | None = None,
) -> torch.Tensor:
    """Each prompt once through a Stable-Diffusion-layout CLIP text encoder -> float32 (P, seq,
    dim)."""
    from transformers import CLIPTextModel, CLIPTokenizer

    root = Path(folder)
    tokenizer = CLIPTokenizer.from_pretrained(root / "tokenizer", local_files_only=True)
    encoder = CLIPTextModel.from_pretrained(root / "text_encoder", local_files_only=True)
    encoder.eval()
    encoder.requires_grad_(False)
    encoder.to(device)
    hidden = encoder.config.hidden_size
    if cross_attention_dim is not None and hidden != cross_attention_dim:
        raise UserError(
            f"model.text_encoder {folder} gives {hidden}-wide embeddings but the UNet's "
            f"cross_attention_dim is {cross_attention_dim}; use a matching pair"
        )
    max_length = tokenizer.model_max_length
    if not max_length or max_length >= _UNSET_MAX_LENGTH:
        max_length = encoder.config.max_position_embeddings
    use_mask = bool(getattr(encoder.config, "use_attention_mask", False))  # as diffusers' SD does
    chunks = []
    with torch.no_grad():
        for start in range(0, len(prompts), batch_size):
            tokens = tokenizer(
                prompts[start : start + batch_size],
                padding="max_length",
                max_length=max_length,
                truncation=True,
                return_tensors="pt",
            )
            mask = tokens.attention_mask.to(device) if use_mask else None
            out = encoder(tokens.input_ids.to(device), attention_mask=mask)
            chunks.append(out.last_hidden_state.to("cpu", torch.float32))
    _release(encoder, device)
    del encoder, tokenizer
    return torch.cat(chunks).contiguous()


# --- the stage ---------------------------------------------------------------------------------


def _uniform_shape(pairs: LmdbPairs) -> tuple[int, int, int] | None:
    """(H, W, 3) shared by every sample of the split, or None when they differ."""
    shapes = {shape[1:] for shape in pairs.shapes}
    return shapes.pop() if len(shapes) == 1 else None


def _batches(pairs: LmdbPairs, batch_size: int):
    for start in range(0, len(pairs), batch_size):
        rows = [pairs[i] for i in range(start, min(start + batch_size, len(pairs)))]
        blurred = torch.from_numpy(np.stack([row[0] for row in rows]))
        sharp = torch.from_numpy(np.stack([row[1] for row in rows]))
        yield start, blurred, sharp
        work_done()


def _save(tensors: dict[str, torch.Tensor], path: Path) -> int:
    from safetensors.torch import save_file

    save_file({name: tensors[name].contiguous() for name in sorted(tensors)}, str(path))
    return path.stat().st_size


def embed_level(
    params: Params,
    level: str,
    shards_dir: Path,
    index_path: Path,
    out_dir: Path,
    device: str = "cpu",
) -> dict:
    """Writes into out_dir (exists, empty; the caller renames it atomically): for each split in
    params.embed.splits that has samples: {split}.safetensors with tensors 'blurred' (N,C,h,w),
    'sharp' (N,C,h,w) in the embed dtype and 'prompt' (N,) int64; prompts.safetensors with
    'embeddings' (P, seq, dim) float32; manifest.json {mode: 'pixel'|'latent', dtype, channels,
    scaling_factor (1.0 in pixel mode), vae, text_encoder, prompts: [the P prompt strings],
    splits: {split: {count, shape: [C,h,w], keys: [sample keys in row order]}}}. Samples in key
    order (LmdbPairs order). A split whose samples differ in shape (test with shards.test_crop
    null) is skipped with a warning and left out of the manifest. Returns a small metrics dict."""
    shards_dir, index_path, out_dir = Path(shards_dir), Path(index_path), Path(out_dir)
    model, embed = params.model, params.embed
    splits, skipped = _embeddable_splits(shards_dir, embed.splits, level)
    prompts = _prompt_table(model, embed.batch_size, splits, index_path, device)
    encoder = _PixelEncoder(model.vae, device)
    encoded = _encode_splits(splits, encoder, embed, level, prompts.rows, out_dir)
    shift = encoder.release()
    written = encoded.bytes + _save({"embeddings": prompts.embeddings}, out_dir / PROMPTS)
    manifest = {
        "mode": encoder.mode,
        "dtype": embed.dtype,
        "channels": encoder.channels,
        "scaling_factor": encoder.scaling_factor,
        "vae": model.vae,
        "text_encoder": model.text_encoder,
        "prompts": prompts.table,
        "splits": encoded.manifest,
    }
    if shift:
        manifest["shift_factor"] = shift  # only for VAEs that set one (SD3/Flux)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    (out_dir / EMBEDDINGS_MANIFEST).write_text(text)
    written += len(text.encode())
    return {
        "mode": encoder.mode,
        "dtype": embed.dtype,
        "samples": {split: m["count"] for split, m in encoded.manifest.items()},
        "skipped": skipped,
        "prompts": len(prompts.table),
        "encode_seconds": round(prompts.seconds + encoded.seconds, 3),
        "bytes": written,
    }


def _embeddable_splits(
    shards_dir: Path, names: list[str], level: str
) -> tuple[dict[str, LmdbPairs], list[str]]:
    """({split: its open pairs} for each named split with samples of one shape, [the splits
    skipped because their samples differ in size]); an empty split is left out silently."""
    splits: dict[str, LmdbPairs] = {}
    skipped: list[str] = []
    for split in dict.fromkeys(names):
        pairs = LmdbPairs(shards_dir, split)
        if len(pairs) == 0:
            log.info("embed@%s: no %s samples; %s left out", level, split, split_file(split))
            continue
        if _uniform_shape(pairs) is None:
            sizes = sorted({f"{w}x{h}" for _, h, w, _ in pairs.shapes})
            log.warning(
                "embed@%s: %s samples differ in size (%s); split skipped (a smaller "
                "shards.%s_crop gives them one size)",
                level,
                split,
                ", ".join(sizes[:4]) + (", ..." if len(sizes) > 4 else ""),
                split,
            )
            skipped.append(split)
            continue
        splits[split] = pairs
    return splits, skipped


@dataclass
class _Prompts:
    """The prompt table, its embeddings, each split's row of the table per sample, and the
    seconds the text encoder ran."""

    table: list[str]
    embeddings: torch.Tensor  # float32 (P, seq, dim)
    rows: dict[str, torch.Tensor]  # split -> int64 (N,)
    seconds: float


def _prompt_table(
    model: ModelParams,
    batch_size: int,
    splits: dict[str, LmdbPairs],
    index_path: Path,
    device: str,
) -> _Prompts:
    """With a text encoder: every distinct prompt of the index and the empty one, encoded, and
    each sample's row by its image's prompt. Without: one null row of zeros for every sample."""
    cross_attention_dim = int(unet_config(model.unet)["cross_attention_dim"])
    if not model.text_encoder:
        return _Prompts(
            table=[NULL_PROMPT],
            embeddings=torch.zeros(1, 1, cross_attention_dim, dtype=torch.float32),
            rows={
                split: torch.zeros(len(pairs), dtype=torch.int64) for split, pairs in splits.items()
            },
            seconds=0.0,
        )
    by_image = _prompts_by_image(index_path)
    per_split = {
        split: _prompt_of_samples(by_image, [m["image_id"] for m in pairs.metas], index_path)
        for split, pairs in splits.items()
    }
    # every distinct prompt of the index, so all levels share one table (training reads the
    # first level's) whichever images each level or split holds; and the empty prompt, which
    # pretrain saves with the base for restoring
    table = sorted(set(by_image.values()) | {NULL_PROMPT})
    started = time.perf_counter()
    embeddings = encode_prompts(model.text_encoder, table, batch_size, device, cross_attention_dim)
    seconds = time.perf_counter() - started
    row_of = {prompt: row for row, prompt in enumerate(table)}
    rows = {
        split: torch.tensor([row_of[p] for p in prompts], dtype=torch.int64)
        for split, prompts in per_split.items()
    }
    return _Prompts(table, embeddings, rows, seconds)


class _PixelEncoder:
    """What a stored sample holds: pixels normalised to [-1, 1] (pixel mode), or the VAE's
    scaled posterior mean (latent mode, model.vae set)."""

    def __init__(self, vae_path: str | None, device: str):
        self.device = device
        self.vae = None
        if vae_path:  # diffusers and peft load only in latent mode: pixel mode needs torch alone
            from linefuse.inference.model import load_vae

            self.vae = load_vae(vae_path).to(device)
        self.mode = "latent" if self.vae is not None else "pixel"
        self.scaling_factor = float(self.vae.config.scaling_factor) if self.vae else 1.0
        self.channels = int(self.vae.config.latent_channels) if self.vae else 3

    def __call__(self, batch: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 3) -> float32 (B, C, h, w)."""
        return normalise(batch) if self.vae is None else encode_pixels(self.vae, batch)

    def release(self) -> float:
        """Frees the VAE; returns its shift factor (0 in pixel mode)."""
        if self.vae is None:
            return 0.0
        shift = _shift_factor(self.vae)
        vae, self.vae = self.vae, None
        _release(vae, self.device)
        del vae
        return shift


@dataclass
class _Encoded:
    """The split files written: their bytes, their manifest entries, the seconds encoding."""

    bytes: int = 0
    manifest: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0


def _encode_splits(
    splits: dict[str, LmdbPairs],
    encoder: _PixelEncoder,
    embed: EmbedParams,
    level: str,
    prompt_rows: dict[str, torch.Tensor],
    out_dir: Path,
) -> _Encoded:
    """Each split's samples encoded in batches into {split}.safetensors (with its prompt rows),
    under one progress bar over every sample."""
    encoded = _Encoded()
    bar = tqdm(
        total=sum(len(p) for p in splits.values()),
        desc=f"embed@{level}",
        unit="sample",
        disable=None,
    )
    with bar:
        for split, pairs in splits.items():
            try:
                out = _encode_pairs(pairs, encoder, embed, bar, encoded)
            finally:
                pairs.close()  # py-lmdb allows one open handle per env and process
            out["prompt"] = prompt_rows[split]
            encoded.bytes += _save(out, out_dir / split_file(split))
            encoded.manifest[split] = {
                "count": len(pairs),
                "shape": list(out["sharp"].shape[1:]),
                "keys": [key.decode() for key in pairs.keys],
            }
    return encoded


def _encode_pairs(
    pairs: LmdbPairs, encoder: _PixelEncoder, embed: EmbedParams, bar: tqdm, encoded: _Encoded
) -> dict[str, torch.Tensor]:
    """{'blurred', 'sharp'}: every sample of one split encoded, (N, C, h, w) in embed.dtype."""
    dtype = DTYPES[embed.dtype]
    out: dict[str, torch.Tensor] = {}
    for start, blurred, sharp in _batches(pairs, embed.batch_size):
        started = time.perf_counter()
        for name, batch in (("blurred", blurred), ("sharp", sharp)):
            tensor = encoder(batch).to("cpu", dtype)
            if name not in out:  # allocated once the first batch gives (C, h, w)
                out[name] = torch.empty((len(pairs), *tensor.shape[1:]), dtype=dtype)
            out[name][start : start + len(tensor)] = tensor
        encoded.seconds += time.perf_counter() - started
        bar.update(len(blurred))
    return out
