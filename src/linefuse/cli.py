"""`linefuse <stage>`: one subcommand per pipeline stage, each reading params.yaml.

User errors (bad params, missing folder, unwritable output) print one line and exit 2 before
anything already built is touched; only a bug shows a traceback.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sqlite3
import sys
import time
from pathlib import Path

from linefuse import paths
from linefuse.params import DEVICES, Params, ParamsError, load_params
from linefuse.stage import UserError, atomic_dir, default_workers, stage, write_json

DISK_ERRORS = {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EDQUOT, errno.EPERM, errno.EFBIG}


def run_generate(params: Params, args: argparse.Namespace) -> None:
    from linefuse.data.charts import generate

    with stage("generate") as written, atomic_dir(paths.GENERATED_DIR) as tmp:
        generate(params.data.charts, tmp, workers=args.workers)
        written.append(paths.GENERATED_DIR)


def run_index(params: Params, args: argparse.Namespace) -> None:
    from linefuse.data.index import build_index, index_metrics
    from linefuse.stage import atomic_file

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


def run_shard(params: Params, args: argparse.Namespace) -> None:
    from linefuse.data.shards import build_level

    level = _known_level(params, args.level)
    if not paths.IMAGES_PARQUET.is_file():
        raise UserError(f"{paths.IMAGES_PARQUET} is missing; run `linefuse index` first")
    out = paths.shards(level)
    with stage(f"shard@{level}") as written:
        with atomic_dir(out) as tmp:
            metrics = build_level(params, level, paths.IMAGES_PARQUET, tmp, workers=args.workers)
        write_json(paths.shard_metrics(level), metrics)
        written += [out, paths.shard_metrics(level)]


def run_embed(params: Params, args: argparse.Namespace) -> None:
    from linefuse.data.layout import SHARD_MANIFEST
    from linefuse.train.embed import embed_level

    level = _known_level(params, args.level)
    shards = paths.shards(level)
    if not (shards / SHARD_MANIFEST).is_file():
        raise UserError(f"{shards} is missing; run `linefuse shard --level {level}` first")
    out = paths.embeddings(level)
    with stage(f"embed@{level}") as written:
        with atomic_dir(out) as tmp:
            device = _device(params, f"embed@{level}")
            metrics = embed_level(
                params, level, shards, paths.IMAGES_PARQUET, tmp, device=device.value
            )
        metrics |= {"device": device.value, "device_reason": device.reason}
        write_json(paths.embed_metrics(level), metrics)
        written += [out, paths.embed_metrics(level)]


def run_pretrain(params: Params, args: argparse.Namespace) -> None:
    from linefuse.train.loop import pretrain_job, pretrain_or_copy

    job = pretrain_job(params)
    with stage("pretrain") as written:
        pretrain_or_copy(params)
        written += [job.out_dir, job.metrics_path]


def run_bank(params: Params, args: argparse.Namespace) -> None:
    from linefuse.data.bank import build_bank

    with stage("bank") as written:
        written.append(build_bank(params, workers=args.workers))


def run_base(params: Params, args: argparse.Namespace) -> None:
    from linefuse.evaluate.model_card import score_and_card
    from linefuse.train.base import train_base

    with stage("base") as written:
        folder, metrics = train_base(params)
        score_and_card(params, folder, metrics)
        written += [folder, paths.train_metrics("base")]


def run_base_window(params: Params, args: argparse.Namespace) -> None:
    from linefuse.evaluate.base_window import score_window
    from linefuse.train.window import summarise, train_window

    started = args.started_at or time.time()
    out, state = Path(args.out), Path(args.state)
    with stage("base-window") as written:
        record = train_window(params, out, state, started + 60 * args.minutes, args.workers)
        write_json(out / "record.json", record)  # the training's record, before scoring
        clock = time.perf_counter()
        record["scores"] = score_window(
            params, out / paths.WINDOW_CANDIDATE_DIR, record["device"], args.workers
        )
        record["phases"]["score"] = {"seconds": time.perf_counter() - clock}
        record["wall_seconds"] = time.time() - started
        record["minutes"], record["state_from"] = args.minutes, str(state)
        record["summary"] = summarise(record)
        write_json(out / "record.json", record)
        written.append(out)
    summary = record["summary"]
    logging.getLogger("linefuse").info(
        "base-window: %.0f pairs/s, %.0f%% of %.0f s in steps; ships: %s",
        summary["pairs_per_s"],
        100 * summary["step_share"],
        record["wall_seconds"],
        record["scores"]["verdict"]["ships"],
    )


def run_base_land(params: Params, args: argparse.Namespace) -> None:
    from linefuse.evaluate.base_window import land_window

    with stage("base-land") as written:
        written += land_window(params, Path(args.window), args.workers, not args.no_score)


def run_label_reader(params: Params, args: argparse.Namespace) -> None:
    from linefuse.evaluate.label_reader_card import score_reader, write_scores_and_card
    from linefuse.train.label_reader_training import train_label_reader

    folder = paths.zoo_model(params.label_reader.name)
    with stage("label-reader") as written:
        reader, metrics = train_label_reader(params, args.workers)
        scores = score_reader(reader, params, args.workers)
        with atomic_dir(folder) as tmp:
            reader.save_pretrained(tmp)
            write_scores_and_card(params, tmp, metrics, scores)
        written.append(folder)


def run_train(params: Params, args: argparse.Namespace) -> None:
    from linefuse.train.loop import train, train_job

    level = args.level
    if level not in params.train.curriculum:
        raise UserError(
            f"--level {level}: not in train.curriculum ({', '.join(params.train.order())})"
        )
    job = train_job(params, level)
    for needed in [paths.BASE_DIR] + ([job.init_adapter] if job.init_adapter else []):
        if not needed.is_dir():
            raise UserError(
                f"{needed} is missing; run the stage that writes it first "
                f"(dvc repro, or snakemake {needed})"
            )
    with stage(job.name) as written:
        train(params, job)
        written += [job.out_dir, job.metrics_path]


def run_train_domains(params: Params, args: argparse.Namespace) -> None:
    from linefuse.train.domains import LOG_DIR, METRICS_PATH, train_domain_adapters

    if params.train.adapters == "per_domain" and not paths.BASE_DIR.is_dir():
        raise UserError(
            f"{paths.BASE_DIR} is missing; run the stage that writes it first "
            f"(dvc repro, or snakemake {paths.BASE_DIR})"
        )
    with stage("train_domains") as written:
        train_domain_adapters(params)
        written += [paths.DOMAIN_ADAPTERS_DIR, LOG_DIR, METRICS_PATH]


def run_profile(params: Params, args: argparse.Namespace) -> None:
    from linefuse.train.profile import format_report, profile, profile_job

    report = profile(params, profile_job(params, args.level, args.full), args.steps)
    print(format_report(report))
    if args.json:
        write_json(args.json, report)


def run_evaluate(params: Params, args: argparse.Namespace) -> None:
    from linefuse.evaluate.evaluate import evaluate

    with stage("evaluate") as written:
        report = evaluate(params, _device(params, "evaluate"), workers=args.workers)
        written += [paths.EVAL_JSON, paths.EVAL_DETAIL, paths.PLOTS_DIR, paths.SAMPLES_PNG]
    log, steps = logging.getLogger("linefuse"), params.eval.steps
    if summary := report["summary"]:
        low, high = summary[f"psnr_gain_s{steps}_low"], summary[f"psnr_gain_s{steps}_high"]
        log.info(
            "evaluate: mean PSNR gain at %d steps %+.2f dB (%.0f%% interval %s), %d test images, "
            "at least %d a cell",
            steps,
            summary[f"psnr_gain_s{steps}"],
            100 * summary["interval_confidence"],
            "n/a" if low is None else f"{low:+.2f} to {high:+.2f}",
            summary["samples"],
            summary["min_cell_samples"],
        )
    if few := report.get("few_step"):
        log.info(
            "evaluate: %d steps vs %d: %+.2f dB shortfall on the sweep's tiles, %.1fx faster",
            few["steps"],
            few["reference_steps"],
            few["psnr_shortfall_db"],
            few["speedup"],
        )


def run_report(params: Params, args: argparse.Namespace) -> None:
    from linefuse.report.report import check_inputs, write_report

    check_inputs()
    with stage("report") as written:
        written.append(write_report(params, Path(args.params)))


def run_restore(params: Params, args: argparse.Namespace) -> None:
    device = _device(params, "restore", args.device)  # before the model libraries load
    from linefuse.inference.restorer import restore_files

    with stage("restore") as written:
        adapter = Path(args.adapter) if args.adapter else paths.adapter(params.train.order()[-1])
        restored, skipped = restore_files(
            params,
            args.inputs,
            adapter,
            args.steps or params.restore_steps,
            Path(args.out),
            seed=args.seed,
            device=device.value,
        )
        written.append(Path(args.out))
    for path, reason in skipped:
        print(f"linefuse: skipped {path}: {reason}", file=sys.stderr)
    logging.getLogger("linefuse").info("restore: %d restored, %d skipped", restored, len(skipped))


def run_serve(params: Params, args: argparse.Namespace) -> None:
    device = _device(params, "serve", args.device)  # before the model libraries load
    import uvicorn

    from linefuse.serve.app import create_app

    uvicorn.run(
        create_app(params, Path(args.adapters), device.value),
        host=args.host,
        port=args.port,
        log_level="info",
    )


def _known_level(params: Params, level: str) -> str:
    if level not in params.degrade.levels:
        raise UserError(
            f"--level {level}: not in degrade.levels ({', '.join(params.degrade.levels)})"
        )
    return level


def _device(params: Params, name: str, requested: str | None = None):
    """The device for `name` (--device, else compute.device), logged with the reason."""
    from linefuse.hardware import choose_device

    choice = (
        choose_device(requested, "--device") if requested else choose_device(params.compute.device)
    )
    logging.getLogger("linefuse").info("%s: device %s (%s)", name, choice.value, choice.reason)
    return choice


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="linefuse", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--params", default=str(paths.PARAMS), help="params file (default: %(default)s)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="STAGE")
    _add_data_stages(commands)
    _add_training_stages(commands)
    _add_base_window(commands)
    _add_base_land(commands)
    _add_profile(commands)
    _add_evaluation_stages(commands)
    _add_restore(commands)
    _add_serve(commands)
    return parser


def _add_stage(
    commands, name: str, handler, help: str, workers: bool = False
) -> argparse.ArgumentParser:
    """Subcommand `name` running `handler(params, args)`; with `workers`, it takes --workers."""
    sub = commands.add_parser(name, help=help)
    sub.set_defaults(handler=handler, workers=1)
    if workers:
        sub.add_argument(
            "--workers",
            type=int,
            default=default_workers(),
            help="processes to use; never changes the output (default: all cores)",
        )
    return sub


def _add_data_stages(commands) -> None:
    """generate, index, shard and embed: from charts to cached model inputs."""
    _add_stage(
        commands,
        "generate",
        run_generate,
        "render the synthetic spectrum charts (the default data)",
        workers=True,
    )
    _add_stage(
        commands,
        "index",
        run_index,
        f"index data.source_dir into {paths.INDEX_DIR}/*.parquet",
        workers=True,
    )
    _add_stage(
        commands, "shard", run_shard, "blur one level into LMDB + WebDataset shards", workers=True
    ).add_argument("--level", required=True, help="a name from degrade.levels")
    _add_stage(
        commands,
        "embed",
        run_embed,
        "cache one level's pixels or VAE latents and prompt embeddings",
    ).add_argument("--level", required=True, help="a name from degrade.levels")


def _add_base_window(commands) -> None:
    """base-window: one GPU window of the shipped base's training."""
    window = _add_stage(
        commands,
        "base-window",
        run_base_window,
        "train the shipped base further for a wall-clock budget (one GPU window), resuming the "
        "last window's stable state; writes the weights it offers, the state and a run record",
        workers=True,
    )
    window.add_argument("--minutes", type=float, required=True, help="the whole window's budget")
    window.add_argument("--out", required=True, help="folder for the record, state and weights")
    window.add_argument(
        "--state",
        default=str(paths.BASE_WINDOWS_DIR),
        help="the last window's stable state (default: %(default)s)",
    )
    window.add_argument(
        "--started-at",
        type=float,
        default=None,
        help="when the window began (seconds since the epoch), if before this command",
    )


def _add_base_land(commands) -> None:
    land = _add_stage(
        commands,
        "base-land",
        run_base_land,
        "score a base window's weights here, ship them if better, and keep its state and "
        f"ledger row in {paths.BASE_WINDOWS_DIR}",
        workers=True,
    )
    land.add_argument("window", help="the folder make base-window wrote (its OUT)")
    land.add_argument(
        "--no-score",
        action="store_true",
        help="only the scores the window made: a part it lacks keeps the shipped base",
    )


def _add_training_stages(commands) -> None:
    """pretrain, base, label-reader, train and train-domains: the models."""
    _add_stage(
        commands,
        "pretrain",
        run_pretrain,
        "train the tiny base UNet on every level (or widen a pretrained one)",
    )
    _add_stage(
        commands,
        "bank",
        run_bank,
        f"draw the base's sharp charts once into an LMDB env under {paths.BANK_ROOT} "
        "(base.bank; resumable)",
        workers=True,
    )
    _add_stage(
        commands,
        "base",
        run_base,
        f"train the base LineFuse ships ({paths.ZOO_DIR.name}/<base.name>) on charts drawn on the "
        "fly, score it and write its model card (hours; resumable)",
    )
    _add_stage(
        commands,
        "label-reader",
        run_label_reader,
        f"train the tick-label reader LineFuse ships ({paths.ZOO_DIR.name}/<label_reader.name>) "
        "on sharp label crops, score it and write its model card",
        workers=True,
    )
    _add_stage(
        commands, "train", run_train, "train one curriculum level's LoRA adapter"
    ).add_argument("--level", required=True, help="a name from train.curriculum")
    _add_stage(
        commands,
        "train-domains",
        run_train_domains,
        "with train.adapters: per_domain, one LoRA adapter "
        "per blur domain and their weighted merge",
    )


def _add_profile(commands) -> None:
    """profile: a few timed training steps of one level or of the full fine-tune."""
    profiler = _add_stage(
        commands,
        "profile",
        run_profile,
        "time a few training steps: data loading, forward and "
        "backward per UNet block, optimizer step (saves no model, state or log)",
    )
    job = profiler.add_mutually_exclusive_group()
    job.add_argument(
        "--level",
        help=f"a name from train.curriculum, trained as LoRA on "
        f"{paths.BASE_DIR} (default: the first level)",
    )
    job.add_argument("--full", action="store_true", help="the full fine-tune (pretrain) instead")
    profiler.add_argument(
        "--steps",
        type=int,
        default=10,
        help="timed steps, after 2 untimed warm-up steps (default: %(default)s)",
    )
    profiler.add_argument("--json", metavar="PATH", help="also write the numbers to this file")


def _add_evaluation_stages(commands) -> None:
    """evaluate and report: the scores and the page that shows them."""
    _add_stage(
        commands,
        "evaluate",
        run_evaluate,
        "PSNR/SSIM per domain and level, baselines, steps, latency",
        workers=True,
    )
    _add_stage(
        commands,
        "report",
        run_report,
        f"{paths.REPORT_HTML}: the eval tables, plots, samples and params on one static page",
    )


def _add_restore(commands) -> None:
    """restore: the trained model on a user's own image files."""
    restore = _add_stage(
        commands, "restore", run_restore, "restore image files or folders of any size"
    )
    restore.add_argument("inputs", nargs="+", metavar="INPUT", help="image files or folders")
    restore.add_argument(
        "--adapter",
        help=f"an adapter folder (default: {paths.LORA_DIR}/LEVEL "
        f"for the last level of train.curriculum, as serve uses)",
    )
    restore.add_argument(
        "--steps", type=int, help="DDIM steps (default: serve.default_steps, else eval.steps)"
    )
    restore.add_argument("--seed", type=int, default=0)
    restore.add_argument("--out", required=True, help="folder for the restored PNGs")
    restore.add_argument("--device", choices=DEVICES, help="overrides compute.device")


def _add_serve(commands) -> None:
    """serve: the trained model behind HTTP."""
    serve = _add_stage(
        commands, "serve", run_serve, "HTTP service: POST /restore, GET /health, GET /adapters"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--adapters",
        default=str(paths.LORA_DIR),
        help="folder of adapter folders (default: %(default)s)",
    )
    serve.add_argument("--device", choices=DEVICES, help="overrides compute.device")


# what sqlite (DVC's state, which DVCLive opens in a DVC repo) says where a write failed
SQLITE_DISK_ERRORS = ("database or disk is full", "disk I/O error")


def _sqlite_disk_error(named: str | None) -> OSError:
    """sqlite names no errno: past a file-size limit (RLIMIT_FSIZE) it is EFBIG, else ENOSPC."""
    import resource

    limited = resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY
    code = errno.EFBIG if limited else errno.ENOSPC
    return OSError(code, os.strerror(code), named)


def disk_error(error: BaseException) -> OSError | None:
    """The full-disk / read-only / permission failure behind `error`, if that is what it is:
    an OSError, one a library raised from, or one safetensors and torch only report as text."""
    named = getattr(error, "filename", None)  # stage() names the outputs when nothing else does
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in DISK_ERRORS:
            return cause
        if isinstance(cause, sqlite3.OperationalError) and str(cause) in SQLITE_DISK_ERRORS:
            return _sqlite_disk_error(named)
        cause = cause.__cause__ or cause.__context__
    text = str(error)
    for code in DISK_ERRORS:
        if f"(os error {code})" in text or f"{os.strerror(code)}" in text:
            return OSError(code, os.strerror(code), named)
    return None


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(name)s %(message)s", stream=sys.stderr)
    logging.getLogger("linefuse").setLevel(logging.INFO)
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
    except Exception as error:
        disk = disk_error(error)
        if disk is None:
            raise
        # half-written files being discarded fail again as they are finalised; that is noise
        sys.unraisablehook = lambda unraisable: None
        where = f" {disk.filename}" if disk.filename else ""
        print(
            f"linefuse: error: cannot write{where}: {disk.strerror}; free space or fix "
            f"permissions and rerun (earlier outputs are untouched)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("linefuse: interrupted; nothing was marked as done", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
