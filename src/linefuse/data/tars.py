"""WebDataset tar shards, written with Python's tarfile: the bytes webdataset's ShardWriter writes.

Our own, not `webdataset.ShardWriter`: importing webdataset imports torch (its package imports
webdataset.pytorch), about 2.6 s a process, paid by every shard@LEVEL run that only writes tars.
Reading stays with webdataset (data/readers.py), and tests/data/test_shards.py checks these
tars against its TarWriter's byte for byte. What webdataset 1.0.2 does, and so this:
- a sample is its members `KEY.EXT`, in sorted EXT order, each mode 0o444, owner "bigdata";
- tarfile in stream mode ("w|"), in tarfile's default (PAX) format;
- a new tar (`pattern % n`, n from 0) once a tar holds `maxcount` samples or MAX_BYTES.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import BinaryIO

MTIME = 0  # every member's: the same samples give the same bytes (webdataset's default is the
#           time of writing); an int, since a float costs every member an extra PAX header
MODE = 0o444
OWNER = "bigdata"  # webdataset's user and group name
MAX_BYTES = 3e9  # webdataset's maxsize: a tar is also cut once its members' bytes reach this


class ShardWriter:
    """Samples (a key and its members' bytes by extension) into tars named `pattern % n`.

    A tar is opened with its first sample, so a writer given none leaves no file.
    """

    def __init__(self, pattern: str, maxcount: int):
        self.pattern = pattern
        self.maxcount = maxcount
        self.fname: str | None = None  # the tar being written
        self._shard = 0
        self._file: BinaryIO | None = None
        self._tar: tarfile.TarFile | None = None
        self._count = self._bytes = 0

    def write(self, key: str, members: dict[str, bytes]) -> None:
        if self._tar is None or self._count >= self.maxcount or self._bytes >= MAX_BYTES:
            self._next_tar()
        for ext, data in sorted(members.items()):
            member = tarfile.TarInfo(f"{key}.{ext}")
            member.size, member.mtime, member.mode = len(data), MTIME, MODE
            member.uname = member.gname = OWNER
            self._tar.addfile(member, io.BytesIO(data))
            self._bytes += member.size
        self._count += 1

    def _next_tar(self) -> None:
        self.close()
        self.fname = self.pattern % self._shard
        self._shard += 1
        self._file = Path(self.fname).open("wb")
        self._tar = tarfile.open(fileobj=self._file, mode="w|")
        self._count = self._bytes = 0

    def close(self) -> None:
        """Finishes the open tar, if any; a later write starts the next one."""
        if self._tar is not None:
            try:
                self._tar.close()
            finally:
                self._file.close()
            self._tar = self._file = None
