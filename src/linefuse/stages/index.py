"""The index stage: list and split the images of data.source_dir into parquet tables.

python -m linefuse.stages.index [--workers N] [--params params.yaml]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from linefuse import paths
from linefuse.data.index import build_index, index_metrics
from linefuse.params import Sections
from linefuse.params.data import DataParams
from linefuse.stage import UserError, atomic_file, stage, stage_main, write_json


class IndexSections(Sections):
    """The sections of params.yaml the index stage reads."""

    data: DataParams


def run(params: IndexSections, args: argparse.Namespace) -> None:
    source = Path(params.data.source_dir)
    if not source.is_dir():
        raise UserError(
            f"data.source_dir: {source} is not a folder; run `linefuse generate` "
            f"or point data.source_dir at a folder of images"
        )
    with stage("index") as written:
        images, rejects = build_index(params.data, workers=args.workers)
        for frame, path in ((images, paths.IMAGES_PARQUET), (rejects, paths.REJECTS_PARQUET)):
            with atomic_file(path) as tmp:
                frame.write_parquet(tmp)
            written.append(path)
        write_json(paths.INDEX_METRICS, index_metrics(images, rejects))
        written.append(paths.INDEX_METRICS)
        if images.is_empty():
            logging.getLogger("linefuse").warning(
                "index: no usable image under %s (%d rejected)", source, rejects.height
            )


def main(argv: list[str] | None = None) -> int:
    return stage_main(run, "index", IndexSections, argv, workers=True)


if __name__ == "__main__":
    sys.exit(main())
