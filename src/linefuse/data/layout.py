"""The file names inside the stages' folders, shared by each writer and every reader.

Kept apart from the writers (shards.py, embed.py) so that reading a folder never imports what
wrote it (the degradations, scipy; the VAE encoder).
"""

from __future__ import annotations

LMDB_DIR = "lmdb"
WDS_DIR = "wds"
SHARD_MANIFEST = "manifest.parquet"  # a shard@LEVEL folder's samples
PAIR_LAYOUT = "blurred,sharp"


def sample_key(image_id: str, domain: str, patch: int) -> str:
    """No dots: WebDataset takes everything after the first dot as the extension."""
    return f"{image_id}_{domain}_{patch:03d}"


def key_domain(key: str) -> str:
    """The blur domain of a sample key written by sample_key (image ids hold no underscore)."""
    return key.split("_")[1]


# an embed@LEVEL folder: {split}.safetensors per split, the prompt table and a manifest
EMBEDDINGS_MANIFEST = "manifest.json"
PROMPTS = "prompts.safetensors"
NULL_PROMPT = ""  # the empty prompt: what restoring conditions on


def split_file(split: str) -> str:
    return f"{split}.safetensors"


# train_domains' folder: one adapter folder per domain, their merge and a manifest naming them
ADAPTERS_MANIFEST = "manifest.json"
COMBINED = "combined"
