"""Every path a stage reads or writes, relative to the project root, defined once.

dvc.yaml and the Snakefile spell these paths for the engines; tests/test_engines.py holds every
path they declare to this module, so a path changed here and not there fails the suite.
"""

from __future__ import annotations

from pathlib import Path

PARAMS = Path("params.yaml")

# data half
GENERATED_DIR = Path("data/source")  # generate's output, the default data.source_dir
INDEX_DIR = Path("data/index")
IMAGES_PARQUET = INDEX_DIR / "images.parquet"
REJECTS_PARQUET = INDEX_DIR / "rejects.parquet"
SHARDS_DIR = Path("data/shards")
EMBEDDINGS_DIR = Path("data/embeddings")

# models: everything `linefuse restore` and `serve` need lives under MODELS_DIR
MODELS_DIR = Path("models")
BASE_DIR = MODELS_DIR / "base"
LORA_DIR = MODELS_DIR / "lora"
DOMAIN_ADAPTERS_DIR = MODELS_DIR / "domains"

# small metrics (DVC metrics, not cached), training logs, resumable training state
METRICS_DIR = Path("metrics")
INDEX_METRICS = METRICS_DIR / "index.json"
EVAL_JSON = METRICS_DIR / "eval.json"
LOGS_DIR = Path("logs")
STATE_ROOT = Path(".linefuse/state")  # outside every DVC output, so a rerun can resume

# evaluate's plots and samples, and the report built from them
PLOTS_DIR = Path("plots")
BY_DOMAIN_CSV = PLOTS_DIR / "psnr_by_domain_level.csv"
BY_STEPS_CSV = PLOTS_DIR / "psnr_vs_steps.csv"
REPORTS_DIR = Path("reports")
SAMPLES_PNG = REPORTS_DIR / "samples.png"
REPORT_HTML = REPORTS_DIR / "index.html"


def shards(level: str) -> Path:
    return SHARDS_DIR / level


def shard_metrics(level: str) -> Path:
    return METRICS_DIR / "shard" / f"{level}.json"


def embeddings(level: str) -> Path:
    return EMBEDDINGS_DIR / level


def embed_metrics(level: str) -> Path:
    return METRICS_DIR / "embed" / f"{level}.json"


def adapter(level: str) -> Path:
    return LORA_DIR / level


def train_metrics(name: str) -> Path:
    """pretrain, a curriculum level or domains."""
    return METRICS_DIR / "train" / f"{name}.json"


def train_logs(name: str) -> Path:
    """pretrain's logs, or a curriculum level's (or domains') under logs/train."""
    return LOGS_DIR / "pretrain" if name == "pretrain" else LOGS_DIR / "train" / name
