"""torch.compile's kernels carried from one base window to the next, per kind of device.

Compiling the base's UNet costs a GPU window over a minute; the kernels it makes depend only on
the model, the setting, the device kind and the versions of torch and Triton. So a window saves
them (`torch.compiler.save_cache_artifacts`) beside its stable state, one entry per device kind,
and the next window on that kind hot-loads them (`load_cache_artifacts`) before it compiles:
inductor then finds every graph in its cache instead of generating and tuning it again. Where the
versions differ, or the kind is new, nothing is loaded and the window compiles as before.

The files are safetensors (each kind's bytes as torch serialised them, packed, in uint8 tensors
of at most paths.WINDOW_FILE_BYTES; the versions, the packing and the bytes' sha256 in the
metadata), in parts where they outgrow one file, as the state is: a lent machine hands back
files of 16 MiB at most, and an H200's kernels for the deep base are 111 MB as torch writes
them. A window packs them with zlib, which takes seconds of the GPU's time; `linefuse base-land`
repacks them here with xz, which packs them smaller, so the kernels the project commits leave
room for the base's state in the 64 MiB a lent machine is sent. torch unpickles parts of those
bytes when it loads them, so only files that LineFuse's own windows wrote and the project
committed are read, and only when their sha256 matches.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
import zlib
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from linefuse import paths
from linefuse.stage import atomic_files

log = logging.getLogger("linefuse")

PACKINGS = {"zlib": (zlib.compress, zlib.decompress), "xz": (lzma.compress, lzma.decompress)}
PART_BYTES = paths.WINDOW_FILE_BYTES - 2**16  # a file's tensors, room left for its header


def versions() -> dict[str, str | None]:
    """What the kernels were made with: a kernel loads only under the same."""
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:  # a CPU build: inductor writes C++, no Triton
        triton_version = None
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton_version}


def _read(folder: Path | None) -> dict[str, tuple[bytes, dict]]:
    """{kind: (bytes, their metadata)} of the kernels in `folder`; {} where there are none."""
    chunks, meta = {}, {}
    for file in paths.window_kernel_files(folder) if folder else []:
        with safe_open(str(file), "pt") as handle:
            meta = json.loads(handle.metadata()["kernels"])
            chunks |= {key: handle.get_tensor(key).numpy().tobytes() for key in handle.keys()}
    entries = {}
    for kind, info in meta.items():
        packed = b"".join(chunks[f"{kind}.{i}"] for i in range(info["chunks"]))
        entries[kind] = (PACKINGS[info["packing"]][1](packed), info)
    return entries


def load_kernels(folder: Path | None, kind: str) -> bool:
    """Hot-loads the kernels saved in `folder` for device `kind`, where the versions match and
    the bytes are the ones saved; returns whether it did (and logs why not)."""
    entry = _read(folder).get(kind)
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


def save_kernels(folder: Path, kind: str, previous: Path | None) -> bool:
    """Writes the kernels compiled in this process for `kind` (or, where nothing new was
    compiled, those loaded from `previous`) beside every other kind's from `previous`, into
    `folder`, zlib-packed. Returns whether `kind` has kernels in it."""
    entries = _read(previous)
    made = torch.compiler.save_cache_artifacts()
    if made is not None:
        data = made[0]
        entries[kind] = (data, {"versions": versions(), "sha256": hashlib.sha256(data).hexdigest()})
    _write(folder, entries, "zlib")
    return kind in entries


def repack_kernels(window: Path, folder: Path) -> list[Path]:
    """The kernels a window wrote in `window`, repacked with xz into `folder` (replacing those
    there). Returns the files written."""
    return _write(folder, _read(window), "xz")


def _write(folder: Path, entries: dict[str, tuple[bytes, dict]], packing: str) -> list[Path]:
    """`entries` packed into `folder`, replacing the kernels there: those stay whole until every
    new file is written."""
    before = paths.window_kernel_files(folder)
    if not entries:
        for old in before:
            old.unlink()
        return []
    chunks, meta = {}, {}
    for kind, (data, info) in entries.items():
        packed = PACKINGS[packing][0](data)
        parts = range(0, len(packed), PART_BYTES)
        chunks |= {f"{kind}.{i}": packed[at : at + PART_BYTES] for i, at in enumerate(parts)}
        meta[kind] = {**info, "packing": packing, "chunks": len(parts)}
    files: list[dict[str, bytes]] = [{}]
    for key, chunk in chunks.items():  # each file filled up to PART_BYTES, in order
        if sum(map(len, files[-1].values())) + len(chunk) > PART_BYTES:
            files.append({})
        files[-1][key] = chunk
    stem = Path(paths.WINDOW_COMPILED_FILE).stem
    names = (
        [paths.WINDOW_COMPILED_FILE]
        if len(files) == 1
        else [f"{stem}-{i:05d}-of-{len(files):05d}.safetensors" for i in range(1, len(files) + 1)]
    )
    metadata = {"kernels": json.dumps(meta)}
    finals = [folder / name for name in names]
    with atomic_files(finals) as tmps:
        for final, part in zip(finals, files, strict=True):
            arrays = {key: bytearray(chunk) for key, chunk in part.items()}
            tensors = {key: torch.frombuffer(a, dtype=torch.uint8) for key, a in arrays.items()}
            save_file(tensors, str(tmps[final]), metadata=metadata)
    for old in set(before) - set(finals):
        old.unlink()
    size = sum((folder / name).stat().st_size for name in names)
    log.info(
        "base-window: wrote %.1f MB of compiled kernels (%s) in %d file(s), %s-packed",
        size / 1e6,
        ", ".join(meta),
        len(names),
        packing,
    )
    return [folder / name for name in names]
