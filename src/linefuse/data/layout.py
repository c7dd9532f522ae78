"""The layout of one shard@LEVEL folder, shared by the writer (shards) and every reader.

Kept apart from shards.py so that reading a level never imports the degradations (scipy).
"""

from __future__ import annotations

LMDB_DIR = "lmdb"
WDS_DIR = "wds"
MANIFEST = "manifest.parquet"
PAIR_LAYOUT = "blurred,sharp"


def sample_key(image_id: str, domain: str, patch: int) -> str:
    """No dots: WebDataset takes everything after the first dot as the extension."""
    return f"{image_id}_{domain}_{patch:03d}"


def key_domain(key: str) -> str:
    """The blur domain of a sample key written by sample_key (image ids hold no underscore)."""
    return key.split("_")[1]
