"""Every path a stage reads or writes, relative to the project root, defined once.

The stage graph (linefuse.pipeline) declares each stage's inputs and outputs with these, and
dvc.yaml and the Snakefile follow from it.
"""

from __future__ import annotations

import json
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
PIPELINE_DIR = MODELS_DIR / "pipeline"  # evaluate: the base as a LineFusePipeline (from_pretrained)
# evaluate's exports for ONNX Runtime (restore and serve on a CPU): the base with the last adapter
# merged, and the base alone, whose scores evaluate reports beside it
ONNX_DIR = MODELS_DIR / "onnx"
ONNX_BASE_DIR = MODELS_DIR / "onnx_base"
ONNX_EXPORTS = (ONNX_DIR, ONNX_BASE_DIR)

# architectures built from scratch by name (model.unet: tiny): train/configs/<name>_unet.json
UNET_CONFIGS_DIR = Path(__file__).resolve().parent / "train" / "configs"


def fresh_config(spec: str) -> Path | None:
    """The config file of the architecture `spec` names (tiny, wide), else None."""
    path = UNET_CONFIGS_DIR / f"{spec}_unet.json"
    return path if "/" not in spec and path.is_file() else None


# models LineFuse trained itself and ships inside the package, a model zoo: model.unet names one
ZOO_DIR = Path(__file__).resolve().parent / "zoo"
CARD_FILE = (
    "README.md"  # a zoo model's card (YAML front matter, then what it is and how it was made)
)
SCORES_FILE = "scores.json"  # its scores, as its card reports them
# what diffusers' save_pretrained names a model's config and weights (diffusers.utils names
# them too, but importing it starts torch)
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "diffusion_pytorch_model.safetensors"


def unet_folder(spec: str) -> Path:
    """model.unet's folder: a shipped model's for its name (chart-base), else the spec as a path."""
    shipped = ZOO_DIR / spec
    return shipped if "/" not in spec and (shipped / CONFIG_FILE).is_file() else Path(spec)


def unet_config(spec: str) -> dict:
    """The UNet's diffusers config: the repo's tiny one, or `config.json` of a shipped model
    (linefuse/zoo) or a local folder."""
    path = fresh_config(spec) or unet_folder(spec) / CONFIG_FILE
    return json.loads(path.read_text())


# the label readers digitize reads with: digitize_reader.name, then its voters' names
DIGITIZE_READERS = ("digitize-reader", "digitize-reader-large", "digitize-reader-restored")


def zoo_model(name: str) -> Path:
    return ZOO_DIR / name


# small metrics (DVC metrics, not cached), training logs, resumable training state
METRICS_DIR = Path("metrics")
INDEX_METRICS = METRICS_DIR / "index.json"
EVAL_JSON = METRICS_DIR / "eval.json"  # evaluate's headline: what `dvc exp show` prints
EVAL_DETAIL = Path("reports/eval_detail.json")  # every table evaluate makes (the report's input)
LOGS_DIR = Path("logs")
STATE_ROOT = Path(".linefuse/state")  # outside every DVC output, so a rerun can resume
# the base's chart bank (linefuse bank): an LMDB env per chart-params fingerprint, resumable
BANK_ROOT = Path(".linefuse/bank")
# digitize's dev and report chart sets (digitize/sets.py), each drawn once per recipe
DIGITIZE_SETS_ROOT = Path(".linefuse/digitize_sets")
# the bases' GPU windows, a folder each (base_windows): the last stable state and the ledger,
# committed (base/window.py)
BASE_WINDOWS_DIR = Path("workflow/base_windows")
# inside a base window's folder (its OUT, and base_windows(name)): the resumable stable state, the
# weights it offers to ship (in base_windows(name): the last offer that did not ship) and
# torch.compile's kernels per device kind, so the next window on that kind does not compile
WINDOW_STATE_FILE = "state.safetensors"  # or its shards, state-00001-of-0000N.safetensors
# the largest file a window writes: a lent machine returns files of 16 MiB at most
WINDOW_FILE_BYTES = 15 * 2**20
WINDOW_CANDIDATE_DIR = "candidate"
WINDOW_COMPILED_FILE = "compiled.safetensors"  # or its parts, compiled-00001-of-0000N.safetensors
PACKED = ".xz"  # a base folder's committed state: each file xz-packed, to travel in less


def base_windows(name: str) -> Path:
    """Base `name`'s windows: its stable state, ledger, scores and the last offer kept."""
    return BASE_WINDOWS_DIR / name


def bank(fingerprint: str) -> Path:
    return BANK_ROOT / fingerprint


# evaluate's plots and samples, and the report built from them
PLOTS_DIR = Path("plots")
BY_DOMAIN_CSV = PLOTS_DIR / "psnr_by_domain_level.csv"
BY_STEPS_CSV = PLOTS_DIR / "psnr_vs_steps.csv"
GAIN_CSV = PLOTS_DIR / "gain_by_cell.csv"
OCR_CSV = PLOTS_DIR / "ocr_cer_by_level.csv"
DIGITIZE_CSV = PLOTS_DIR / "digitize_error_by_level.csv"
REPORTS_DIR = Path("reports")
SAMPLES_PNG = REPORTS_DIR / "samples.png"
REPORT_HTML = REPORTS_DIR / "index.html"

# the project's README: `make readme` rewrites its picture and figures from the run it describes
# (report/readme.py), with the wall time, commit and machine `make repro` recorded of that run
README = Path("README.md")
README_PICTURE = Path("docs/images/before_after.png")
RUN_RECORD = Path(".linefuse/run.json")  # git-ignored: this checkout's last run


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
    """pretrain's and base's logs, or a curriculum level's (or domains') under logs/train."""
    return LOGS_DIR / name if name in ("pretrain", "base") else LOGS_DIR / "train" / name


def window_state_files(folder: Path) -> list[Path]:
    """A window's stable state in `folder`: state.safetensors, or its shards in order, each
    xz-packed (FILE.xz) where a base's folder keeps it (base/window.py's pack_state)."""
    return _whole_or_parts(folder, WINDOW_STATE_FILE)


def window_kernel_files(folder: Path) -> list[Path]:
    """A window's compiled kernels in `folder`: compiled.safetensors, or its parts in order."""
    return _whole_or_parts(folder, WINDOW_COMPILED_FILE)


def _whole_or_parts(folder: Path, name: str) -> list[Path]:
    """`name` in `folder`, or its parts NAME-00001-of-0000N in order; or the same xz-packed."""
    stem, suffix = Path(name).stem, Path(name).suffix
    for end in (suffix, suffix + PACKED):
        whole = Path(folder) / f"{stem}{end}"
        parts = sorted(Path(folder).glob(f"{stem}-*-of-*{end}"))
        if whole.is_file() or parts:
            return [whole] if whole.is_file() else parts
    return []
