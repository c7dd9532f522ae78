"""`linefuse <command>`: the pipeline's stages and the commands around them.

Around them: restore, serve, and the training of the models LineFuse ships; each reads
params.yaml.

A stage (`linefuse shard --level easy`) runs its own module, `python -m linefuse.stages.shard`,
which is what dvc.yaml and the Snakefile call: so this file is no stage's code, and an edit here
reruns nothing. User errors (bad params, missing folder, unwritable output) print one line and
exit 2 before anything already built is touched; only a bug shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from linefuse import paths, stages
from linefuse.params import DEVICES, load_sections
from linefuse.serve.settings import ServingSections
from linefuse.stage import UserError, add_workers_option, atomic_dir, guarded, stage, write_json

if TYPE_CHECKING:
    from linefuse.params.full import Params

# `linefuse NAME` for each stage: the module under linefuse.stages that runs it. Read from the
# package's folder, not from the graph (linefuse.pipeline), whose import would cost restore and
# serve a tenth of their start-up: the graph is imported only to describe the stages in the help.
STAGE_MODULES = {
    module.name.replace("_", "-"): module.name for module in pkgutil.iter_modules(stages.__path__)
}


def run_bank(params: Params, args: argparse.Namespace) -> None:
    from linefuse.base.bank import build_bank

    with stage("bank") as written:
        written.append(build_bank(params, workers=args.workers))


def run_base(params: Params, args: argparse.Namespace) -> None:
    from linefuse.base.card import score_and_card
    from linefuse.base.train import train_base

    with stage("base") as written:
        folder, metrics = train_base(params)
        score_and_card(params, folder, metrics)
        written += [folder, paths.train_metrics("base")]


def run_base_window(params: Params, args: argparse.Namespace) -> None:
    from linefuse.base.window import summarise, train_window

    started = args.started_at or time.time()
    out = Path(args.out)
    state = Path(args.state) if args.state else paths.base_windows(params.base.name)
    with stage("base-window") as written:
        deadline = started + 60 * args.minutes
        record = train_window(params, out, state, deadline, args.workers, args.trace)
        record["wall_seconds"] = time.time() - started
        record["minutes"], record["state_from"] = args.minutes, str(state)
        record["summary"] = summarise(record)
        write_json(out / "record.json", record)
        written.append(out)
    summary = record["summary"]
    logging.getLogger("linefuse").info(
        "base-window: %.0f pairs/s, %.0f%% of %.0f s in steps; score it here with "
        "`linefuse base-land %s`",
        summary["pairs_per_s"],
        100 * summary["step_share"],
        record["wall_seconds"],
        out,
    )


def run_base_land(params: Params, args: argparse.Namespace) -> None:
    from linefuse.base.land import land_window

    with stage("base-land") as written:
        written += land_window(params, Path(args.window), args.workers)


def run_label_reader(params: Params, args: argparse.Namespace) -> None:
    """label-reader and digitize-reader: the reader their params.yaml section describes and each
    of its voters; digitize's also as the ONNX graphs digitize reads with."""
    from linefuse.digitize.label_onnx import export_reader
    from linefuse.evaluate.label_reader_card import score_reader, write_scores_and_card
    from linefuse.train.label_reader_training import train_label_reader

    section = args.command.replace("-", "_")
    readers = getattr(params, section).readers()  # the section's reader, then its voters
    names = [cfg.name for cfg in readers]
    if args.reader and args.reader not in names:
        raise UserError(
            f"--reader {args.reader}: {section} has no reader of that name; "
            f"choose among {', '.join(names)}"
        )
    with stage(args.command) as written:
        for cfg in readers:
            if args.reader and cfg.name != args.reader:
                continue
            reader, metrics = train_label_reader(params, cfg, args.workers)
            scores = score_reader(reader, params, cfg, args.workers)
            folder = paths.zoo_model(cfg.name)
            with atomic_dir(folder) as tmp:
                reader.save_pretrained(tmp)
                if section == "digitize_reader":
                    export_reader(tmp)
                write_scores_and_card(params, section, cfg, tmp, metrics, scores)
            written.append(folder)


def run_profile(params: Params, args: argparse.Namespace) -> None:
    from linefuse.train.profile import format_report, profile, profile_job

    report = profile(params, profile_job(params, args.level, args.full), args.steps)
    print(format_report(report))
    if args.json:
        write_json(args.json, report)


def _adapter(params: ServingSections, args: argparse.Namespace) -> Path:
    """The adapter restore and digitize run: --adapter, else the curriculum's last level's."""
    return Path(args.adapter) if args.adapter else paths.adapter(params.train.restoring_level())


def run_restore(params: ServingSections, args: argparse.Namespace) -> None:
    from linefuse.hardware import logged_device

    device = logged_device(params, "restore", args.device)  # before the model libraries load
    from linefuse.inference.restorer import restore_files
    from linefuse.serve.settings import restore_steps

    with stage("restore") as written:
        adapter = _adapter(params, args)
        restored, skipped = restore_files(
            params,
            args.inputs,
            adapter,
            args.steps or restore_steps(params),
            Path(args.out),
            seed=args.seed,
            device=device.value,
        )
        written.append(Path(args.out))
    for path, reason in skipped:
        print(f"linefuse: skipped {path}: {reason}", file=sys.stderr)
    logging.getLogger("linefuse").info("restore: %d restored, %d skipped", restored, len(skipped))


def run_digitize(params: ServingSections, args: argparse.Namespace) -> None:
    restore = None
    if not args.no_restore:
        from linefuse.hardware import logged_device

        device = logged_device(params, "digitize", args.device)  # before the model libraries
        from linefuse.inference.restorer import Restorer, check_steps
        from linefuse.serve.settings import restore_steps

        steps = args.steps or restore_steps(params)
        check_steps(params, steps)
        adapter = _adapter(params, args)
        restorer = Restorer.from_params(params, adapter, device.value)
        restore = partial(restorer.restore_pair, steps=steps, seed=args.seed)
    from linefuse.digitize.outputs import digitize_files

    with stage("digitize") as written:
        summary = digitize_files(args.inputs, Path(args.out), restore)
        written.append(Path(args.out))
    logging.getLogger("linefuse").info(
        "digitize: %d of %d charts digitized, %d unreadable",
        summary["digitized"],
        summary["charts"],
        len(summary["unreadable"]),
    )


def run_serve(params: ServingSections, args: argparse.Namespace) -> None:
    from linefuse.hardware import logged_device

    device = logged_device(params, "serve", args.device)  # before the model libraries load
    import uvicorn

    from linefuse.serve.app import create_app

    uvicorn.run(
        create_app(params, Path(args.adapters), device.value),
        host=args.host,
        port=args.port,
        log_level="info",
    )


class _HelpWithStages(argparse.Action):
    """-h, --help: the help, with each stage described as the graph declares it."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        build_parser(describe_stages=True).print_help()
        parser.exit()


def build_parser(describe_stages: bool = False) -> argparse.ArgumentParser:
    """The command line; `describe_stages`: list each stage with its description (the help
    does), in the graph's order, importing the graph."""
    parser = argparse.ArgumentParser(
        prog="linefuse", description=__doc__.splitlines()[0], add_help=False
    )
    parser.add_argument(
        "-h", "--help", action=_HelpWithStages, help="show this help message and exit"
    )
    parser.add_argument(
        "--params", default=str(paths.PARAMS), help="params file (default: %(default)s)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if describe_stages:
        from linefuse.pipeline import STAGES

        for stage_info in STAGES:
            name = stage_info.command.replace("_", "-")
            commands.add_parser(name, help=f"stage: {stage_info.desc}", add_help=False)
    else:
        for name in STAGE_MODULES:
            commands.add_parser(name, add_help=False)
    _add_training_commands(commands)
    _add_base_window(commands)
    _add_base_land(commands)
    _add_profile(commands)
    _add_restore(commands)
    _add_digitize(commands)
    _add_serve(commands)
    return parser


def _add_stage(
    commands, name: str, handler, help: str, workers: bool = False, sections=None
) -> argparse.ArgumentParser:
    """Subcommand `name` running `handler(params, args)`, params.yaml read as `sections` (a
    linefuse.params.Sections model; None: the whole file, linefuse.params.full.Params); with
    `workers`, it takes --workers."""
    sub = commands.add_parser(name, help=help)
    sub.set_defaults(handler=handler, workers=1, sections=sections)
    if workers:
        add_workers_option(sub)
    return sub


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
        help=f"the last window's stable state (default: {paths.BASE_WINDOWS_DIR}/<base.name>)",
    )
    window.add_argument(
        "--trace",
        type=int,
        default=0,
        metavar="STEPS",
        help="profile this many training steps and time a twice-as-wide UNet's step, into the "
        "record (default: none)",
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
        f"ledger row in {paths.BASE_WINDOWS_DIR}/<base.name>",
        workers=True,
    )
    land.add_argument("window", help="the folder make base-window wrote (its OUT)")


def _add_training_commands(commands) -> None:
    """bank, base, label-reader and digitize-reader: the models LineFuse ships."""
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
    label = _add_stage(
        commands,
        "label-reader",
        run_label_reader,
        f"train the tick-label reader LineFuse ships ({paths.ZOO_DIR.name}/<label_reader.name>) "
        "on sharp label crops, score it and write its model card",
        workers=True,
    )
    digitize = _add_stage(
        commands,
        "digitize-reader",
        run_label_reader,
        f"train the tick-label reader digitize reads with ({paths.ZOO_DIR.name}/"
        "<digitize_reader.name>) on sharp and degraded label crops, score it and write its card",
        workers=True,
    )
    for sub in (label, digitize):
        sub.add_argument(
            "--reader",
            metavar="NAME",
            help="remake only this one of the section's readers (its name or a voter's; "
            "default: every one)",
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


def _add_restore(commands) -> None:
    """restore: the trained model on a user's own image files."""
    restore = _add_stage(
        commands,
        "restore",
        run_restore,
        "restore image files or folders of any size",
        sections=ServingSections,
    )
    restore.add_argument("inputs", nargs="+", metavar="INPUT", help="image files or folders")
    restore.add_argument("--out", required=True, help="folder for the restored PNGs")
    _add_model_options(restore)


def _add_model_options(command) -> None:
    """What restore and digitize restore with: the adapter, the steps, the seed, the device."""
    command.add_argument(
        "--adapter",
        help=f"an adapter folder (default: {paths.LORA_DIR}/LEVEL "
        f"for the last level of train.curriculum, as serve uses)",
    )
    command.add_argument(
        "--steps", type=int, help="DDIM steps (default: serve.default_steps, else eval.steps)"
    )
    command.add_argument("--seed", type=int, default=0)
    command.add_argument("--device", choices=DEVICES, help="overrides compute.device")


def _add_digitize(commands) -> None:
    """digitize: a chart's data back out of its pixels, restored first."""
    digitize = _add_stage(
        commands,
        "digitize",
        run_digitize,
        "read line charts' series in data units from their pixels (CSV, axes JSON, overlay)",
        sections=ServingSections,
    )
    digitize.add_argument("inputs", nargs="+", metavar="IMAGE", help="image files or folders")
    digitize.add_argument(
        "--out", required=True, help="folder for NAME.csv, NAME.json and NAME.overlay.png"
    )
    digitize.add_argument(
        "--no-restore", action="store_true", help="digitize the images as they are (sharp ones)"
    )
    _add_model_options(digitize)


def _add_serve(commands) -> None:
    """serve: the trained model behind HTTP."""
    serve = _add_stage(
        commands,
        "serve",
        run_serve,
        "HTTP service: POST /restore, GET /health, GET /adapters",
        sections=ServingSections,
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--adapters",
        default=str(paths.LORA_DIR),
        help="folder of adapter folders (default: %(default)s)",
    )
    serve.add_argument("--device", choices=DEVICES, help="overrides compute.device")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command in STAGE_MODULES:  # a stage: its own module parses the rest and runs it
        stage_module = importlib.import_module(f"linefuse.stages.{STAGE_MODULES[args.command]}")
        return stage_module.main(["--params", args.params, *rest])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return guarded(lambda: args.handler(load_sections(_sections(args), args.params), args), args)


def _sections(args: argparse.Namespace) -> type:
    """The model params.yaml is read as for args' command: its own, else the whole file (whose
    every section's schema restore and serve do not import)."""
    if args.sections is not None:
        return args.sections
    from linefuse.params.full import Params

    return Params


if __name__ == "__main__":
    sys.exit(main())
