"""`linefuse <stage>`: one subcommand per pipeline stage, each reading params.yaml.

User errors (bad params, missing folder, unwritable output) print one line and exit 2 before
anything already built is touched; only a bug shows a traceback.
"""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path

from .params import Params, ParamsError, load_params
from .stage import UserError, atomic_dir, default_workers, stage, write_json

GENERATED_DIR = Path("data/source")
INDEX_DIR = Path("data/index")
SHARDS_DIR = Path("data/shards")
METRICS_DIR = Path("metrics")
DISK_ERRORS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT, errno.EPERM}


def run_generate(params: Params, args: argparse.Namespace) -> None:
    from .charts import generate

    with stage("generate") as written, atomic_dir(GENERATED_DIR) as tmp:
        generate(params.data.charts, tmp, workers=args.workers)
        written.append(GENERATED_DIR)


def run_index(params: Params, args: argparse.Namespace) -> None:
    from .index import build_index, index_metrics
    from .stage import atomic_file

    source = Path(params.data.source_dir)
    if not source.is_dir():
        raise UserError(f"data.source_dir: {source} is not a folder; run `linefuse generate` "
                        f"or point data.source_dir at a folder of images")
    with stage("index") as written:
        images, rejects = build_index(params.data, workers=args.workers)
        for frame, name in ((images, "images.parquet"), (rejects, "rejects.parquet")):
            with atomic_file(INDEX_DIR / name) as tmp:
                frame.write_parquet(tmp)
            written.append(INDEX_DIR / name)
        write_json(METRICS_DIR / "index.json", index_metrics(images, rejects))
        written.append(METRICS_DIR / "index.json")
        if images.is_empty():
            logging.getLogger("linefuse").warning(
                "index: no usable image under %s (%d rejected)", source, rejects.height)


def run_shard(params: Params, args: argparse.Namespace) -> None:
    from .shards import build_level

    level = args.level
    if level not in params.degrade.levels:
        raise UserError(f"--level {level}: not in degrade.levels "
                        f"({', '.join(params.degrade.levels)})")
    index_path = INDEX_DIR / "images.parquet"
    if not index_path.is_file():
        raise UserError(f"{index_path} is missing; run `linefuse index` first")
    out = SHARDS_DIR / level
    with stage(f"shard@{level}") as written:
        with atomic_dir(out) as tmp:
            metrics = build_level(params, level, index_path, tmp, workers=args.workers)
        write_json(METRICS_DIR / "shard" / f"{level}.json", metrics)
        written += [out, METRICS_DIR / "shard" / f"{level}.json"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="linefuse", description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml", help="params file (default: %(default)s)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="STAGE")

    def add(name: str, handler, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help)
        sub.add_argument("--workers", type=int, default=default_workers(),
                         help="processes to use; never changes the output (default: all cores)")
        sub.set_defaults(handler=handler)
        return sub

    add("generate", run_generate, "render the synthetic spectrum charts (the default data)")
    add("index", run_index, "index data.source_dir into data/index/*.parquet")
    add("shard", run_shard, "blur one level into LMDB + WebDataset shards").add_argument(
        "--level", required=True, help="a name from degrade.levels")
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s", stream=sys.stderr)
    args = build_parser().parse_args(argv)
    if args.workers < 1:
        print("linefuse: error: --workers must be at least 1", file=sys.stderr)
        return 2
    try:
        params = load_params(args.params)
        args.handler(params, args)
    except (ParamsError, UserError) as error:
        print(f"linefuse: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        if error.errno not in DISK_ERRORS:
            raise
        where = f" {error.filename}" if error.filename else ""
        print(f"linefuse: error: cannot write{where}: {error.strerror}; free space or fix "
              f"permissions and rerun (earlier outputs are untouched)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("linefuse: interrupted; nothing was marked as done", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
