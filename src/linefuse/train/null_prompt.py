"""The empty prompt's embedding as training saw it: the embed stage's row for "" (a text
encoder's, or zeros), or one token of zeros when training reads pixels. pretrain saves it with the
base, and restoring conditions on it. Read with numpy, so that pretrain's copy of a shipped base
starts no torch; training takes it with torch.from_numpy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from linefuse import paths
from linefuse.data.layout import EMBEDDINGS_MANIFEST, NULL_PROMPT, PROMPTS
from linefuse.paths import unet_config
from linefuse.stage import UserError

if TYPE_CHECKING:
    from linefuse.params.full import Params

# safetensors' dtype names as numpy reads them: numpy has no bfloat16 (embed.dtype may be one),
# whose bits are a float32's upper half, so its rows are read as uint16 and widened
NUMPY_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def null_prompt(params: Params, levels: list[str]) -> np.ndarray:
    """(1, tokens, width) float32: the row for "" of the first level's prompt table when
    training reads embeddings, else one token of zeros as wide as the UNet's cross-attention."""
    if params.loader.reader != "embeddings":
        width = unet_config(params.model.unet)["cross_attention_dim"]
        return np.zeros((1, 1, width), np.float32)
    embeddings = paths.embeddings(levels[0])
    table = json.loads((embeddings / EMBEDDINGS_MANIFEST).read_text())["prompts"]
    if NULL_PROMPT not in table:
        raise UserError(
            f"{embeddings} has no empty prompt in its table (embedded before "
            f"LineFuse always added it); rerun `linefuse embed`"
        )
    rows = float32_tensor(embeddings / PROMPTS, "embeddings")
    return np.ascontiguousarray(rows[table.index(NULL_PROMPT)][None])


def float32_tensor(path: Path, name: str) -> np.ndarray:
    """Tensor `name` of a safetensors file as float32, whatever float type it was saved in
    (safetensors.numpy cannot read bfloat16: the header is read here, as its format documents:
    8 bytes of header length, the JSON header, then the tensors' bytes)."""
    raw = path.read_bytes()
    length = int.from_bytes(raw[:8], "little")
    entry = json.loads(raw[8 : 8 + length])[name]
    start, end = (8 + length + offset for offset in entry["data_offsets"])
    values = np.frombuffer(raw[start:end], NUMPY_DTYPES[entry["dtype"]]).reshape(entry["shape"])
    if entry["dtype"] == "BF16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32)
