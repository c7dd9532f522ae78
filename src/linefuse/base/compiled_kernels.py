"""torch.compile's kernels carried from one base window to the next, per kind of device.

Compiling the base's UNet costs a GPU window over a minute; the kernels it makes depend only on
the model, the setting, the device kind and the versions of torch and Triton. So a window saves
them (`torch.compiler.save_cache_artifacts`) beside its stable state, one entry per device kind,
and the next window on that kind hot-loads them (`load_cache_artifacts`) before it compiles:
inductor then finds every graph in its cache instead of generating and tuning it again. Where the
versions differ, or the kind is new, nothing is loaded and the window compiles as before.

The file is safetensors (one uint8 tensor of torch's own serialised bytes per kind, zlib-packed,
the versions and the bytes' sha256 in the metadata). Packed, because a lent machine hands back
files of 16 MiB at most and an H200's kernels for the base are about 42 MB as torch writes them:
unpacked they never came back, and every fresh machine compiled for a minute again. torch
unpickles parts of those bytes when it loads them, so only files that LineFuse's own windows
wrote and the project committed are read, and only when their sha256 matches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import zlib
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

log = logging.getLogger("linefuse")

PACKING = "zlib"
RETURNED_BYTES = 16 * 2**20  # the largest file a lent machine hands back


def versions() -> dict[str, str | None]:
    """What the kernels were made with: a kernel loads only under the same."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:  # a CPU build: inductor writes C++, no Triton
        triton_version = None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton_version}


def _read(path: Path) -> dict[str, tuple[bytes, dict]]:
    """{kind: (bytes, their metadata)} of a kernels file; {} where there is none."""
    if not path.is_file():
        return {}
    with safe_open(str(path), "pt") as handle:
        meta = json.loads(handle.metadata()["kernels"])
        entries = {}
        for kind, info in meta.items():
            data = handle.get_tensor(kind).numpy().tobytes()
            if info.get("packing") == PACKING:
                data = zlib.decompress(data)
            entries[kind] = (data, info)
        return entries


def load_kernels(path: Path, kind: str) -> bool:
    """Hot-loads the kernels saved in `path` for device `kind`, where the versions match and the
    bytes are the ones saved; returns whether it did (and logs why not)."""
    entry = _read(path).get(kind)
    if entry is None:
        log.info("base-window: no compiled kernels stored for %s; compiling", kind)
        return False
    data, meta = entry
    if meta["versions"] != versions():
        log.info(
            "base-window: the kernels stored for %s were made with %s, this is %s; compiling",
            kind,
            meta["versions"],
            versions(),
        )
        return False
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        log.warning("base-window: the kernels stored for %s do not match their sha256", kind)
        return False
    torch.compiler.load_cache_artifacts(data)
    log.info("base-window: loaded %.1f MB of compiled kernels for %s", len(data) / 1e6, kind)
    return True


def save_kernels(path: Path, kind: str, previous: Path) -> bool:
    """Writes `path`: the kernels compiled in this process for `kind` (or, where nothing new was
    compiled, those loaded from `previous`) beside every other kind's from `previous`. Returns
    whether `kind` has kernels in it."""
    entries = _read(previous)
    made = torch.compiler.save_cache_artifacts()
    if made is not None:
        data = made[0]
        entries[kind] = (data, {"versions": versions(), "sha256": hashlib.sha256(data).hexdigest()})
    if not entries:
        return False
    packed = {k: zlib.compress(data) for k, (data, _) in entries.items()}
    tensors = {k: torch.frombuffer(bytearray(b), dtype=torch.uint8) for k, b in packed.items()}
    meta = {k: {**info, "packing": PACKING} for k, (_, info) in entries.items()}
    save_file(tensors, str(path), metadata={"kernels": json.dumps(meta)})
    size = path.stat().st_size
    log.info("base-window: wrote %.1f MB of compiled kernels (%s)", size / 1e6, ", ".join(meta))
    if size > RETURNED_BYTES:
        log.warning(
            "base-window: %s is %.1f MB, over the %d MiB a lent machine hands back",
            path,
            size / 1e6,
            RETURNED_BYTES // 2**20,
        )
    return kind in entries
