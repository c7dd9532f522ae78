"""Bad params stop the run before any work, with one line naming the key."""

from __future__ import annotations

import shutil

import pytest
import yaml
from pydantic import BaseModel

from linefuse.params import ParamsError
from linefuse.params.full import Params, load_params, parse_params
from linefuse.pipeline import STAGES
from linefuse.serve.settings import ServeParams, restore_steps, serve_settings

from conftest import ROOT, file_digests, run_cli, tiny_params, write_params


def test_repo_params_are_valid():
    params = load_params(ROOT / "params.yaml")
    assert params.degrade.levels == ["easy", "medium", "hard"]
    assert params.degrade.level("gaussian", "hard").sigma == (1.5, 2.5)
    assert params.degrade.level("motion", "easy").length == (3, 7)


def test_restore_steps_default_to_what_evaluate_scored():
    params = load_params(ROOT / "params.yaml")
    assert serve_settings(params).default_steps is None
    assert restore_steps(params) == params.eval.steps
    eval_3 = params.eval.model_copy(update={"steps": 3})
    assert restore_steps(params.model_copy(update={"eval": eval_3})) == 3
    serve_7 = params.serve | {"default_steps": 7}
    assert restore_steps(params.model_copy(update={"serve": serve_7})) == 7


def test_a_bad_serve_key_is_named_where_restore_and_serve_read_it():
    """The serve section is validated by restore and serve (serve/settings.py), not by the
    stages, which never read it; its errors name the key all the same."""
    params = load_params(ROOT / "params.yaml")
    bad = params.model_copy(update={"serve": params.serve | {"max_steps": 0}})
    with pytest.raises(ParamsError) as error:
        serve_settings(bad)
    assert str(error.value).startswith("params.yaml: serve.max_steps: ")
    typo = params.model_copy(update={"serve": params.serve | {"max_step": 5}})
    with pytest.raises(ParamsError, match=r"^params.yaml: serve.max_step: unknown key"):
        serve_settings(typo)


def _fields(model: type[BaseModel], prefix: str = ""):
    """(dotted key, field) for every field of the params models, nested sections included."""
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", field
        for kind in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from _fields(kind, f"{prefix}{name}.")


def test_params_yaml_is_the_only_source_of_defaults():
    """The models declare types and constraints only: no field has a value of its own."""
    keys = dict(_fields(Params)) | dict(_fields(ServeParams, "serve."))
    assert len(keys) > 100 and "optim.loss.balance" in keys and "degrade.scan" in keys
    assert [key for key, field in keys.items() if not field.is_required()] == []


@pytest.mark.parametrize(
    "key",
    [
        "optim.precision",
        "eval.max_samples",
        "data.charts.dpi",
        "train.lora.blocks",
        "degrade.scan.easy.line_fade",
        "compute",
    ],
)
def test_a_key_missing_from_params_yaml_is_named(key):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    *parents, last = key.split(".")
    section = raw
    for part in parents:
        section = section[part]
    del section[last]
    with pytest.raises(ParamsError) as error:
        parse_params(raw)
    assert str(error.value) == f"params.yaml: {key}: missing; this key is required"


MUTATIONS = [
    ("unknown key", lambda p: p["data"].update(sorce_dir="x"), "data.sorce_dir", "unknown key"),
    (
        "processes on a one-process config",
        lambda p: p.update(
            launch={"processes": 2, "config": str(ROOT / "workflow/accelerate/local.yaml")}
        ),
        "launch.processes",
        "launch.config: workflow/accelerate/ddp.yaml",
    ),
    (
        "zero processes",
        lambda p: p["launch"].update(processes=0),
        "launch.processes",
        "greater than or equal to 1",
    ),
    (
        "shard urls for no level",
        lambda p: p["loader"].update(shard_urls={"extreme": "x.tar"}),
        "loader.shard_urls.extreme",
        "not in degrade.levels",
    ),
    (
        "shard url scheme",
        lambda p: p["loader"].update(shard_urls={"easy": "s3://b/a.tar"}),
        "loader.shard_urls",
        "pipe:COMMAND",
    ),
    ("unknown section", lambda p: p.update(trian={}), "trian", "unknown key"),
    (
        "wrong type",
        lambda p: p["data"]["charts"].update(count="many"),
        "data.charts.count",
        "integer",
    ),
    (
        "empty range",
        lambda p: p["degrade"]["gaussian"]["hard"].update(sigma=[2.5, 1.5]),
        "degrade.gaussian.hard.sigma",
        "empty",
    ),
    (
        "not a pair",
        lambda p: p["degrade"]["motion"]["easy"].update(length=7),
        "degrade.motion.easy.length",
        "[low, high]",
    ),
    (
        "unknown domain",
        lambda p: p["degrade"].update(domains=["gaussian", "fog"]),
        "degrade.domains",
        "accepts gaussian",
    ),
    (
        "split sum",
        lambda p: p["data"].update(split={"train": 0.8, "val": 0.1, "test": 0.2}),
        "data.split",
        "sum to 1",
    ),
    (
        "missing level",
        lambda p: p["degrade"]["scan"].pop("medium"),
        "degrade.scan.medium",
        "missing",
    ),
    ("crop too large", lambda p: p["shards"].update(crop=100), "shards.crop", "at most 64"),
    (
        "timesteps past the schedule",
        lambda p: p["optim"].update(timestep_range=[700, 1001]),
        "optim.timestep_range",
        "0 <= low < high <= 1000",
    ),
    (
        "identity fraction of one",
        lambda p: p["optim"].update(identity_fraction=1.0),
        "optim.identity_fraction",
        "less than 1",
    ),
    (
        "start fraction above one",
        lambda p: p["optim"].update(start_fraction=1.5),
        "optim.start_fraction",
        "less than or equal to 1",
    ),
    ("focus above one", lambda p: p["shards"].update(focus=1.5), "shards.focus", "1"),
    (
        "negative count",
        lambda p: p["data"]["charts"].update(count=-1),
        "data.charts.count",
        "greater than or equal",
    ),
    (
        "quality out of range",
        lambda p: p["degrade"]["compression"]["hard"].update(quality=[0, 55]),
        "degrade.compression.hard.quality",
        ">= 1",
    ),
    (
        "per-domain adapter for an unknown domain",
        lambda p: p["train"]["per_domain"].update(domains=["gaussian", "fog"]),
        "train.per_domain.domains",
        "accepts gaussian",
    ),
    (
        "one merge weight per domain",
        lambda p: p["train"]["per_domain"].update(domains=["gaussian", "scan"], weights=[1.0]),
        "train.per_domain.weights",
        "one per domain",
    ),
    (
        "unknown adapters mode",
        lambda p: p["train"].update(adapters="per_level"),
        "train.adapters",
        "curriculum",
    ),
    (
        "unknown sampler start",
        lambda p: p["model"].update(sample_start="zeros"),
        "model.sample_start",
        "mean",
    ),
    (
        "negative LoRA rank",
        lambda p: p["train"]["lora"].update(rank=-4),
        "train.lora.rank",
        "greater than or equal to 1",
    ),
    (
        "zero curriculum steps",
        lambda p: p["train"]["curriculum"]["easy"].update(steps=0),
        "train.curriculum.easy.steps",
        "greater than or equal to 1",
    ),
    (
        "zero pretrain steps",
        lambda p: p["pretrain"].update(steps=0),
        "pretrain.steps",
        "greater than",
    ),
    (
        "unknown curriculum predecessor",
        lambda p: p["train"]["curriculum"]["hard"].update(init="models/lora/extreme"),
        "train.curriculum.hard.init",
        "names no curriculum level",
    ),
    (
        "curriculum cycle",
        lambda p: p["train"]["curriculum"]["easy"].update(init="models/lora/hard"),
        "train.curriculum",
        "cycle",
    ),
    (
        "curriculum level not sharded",
        lambda p: p["train"]["curriculum"].update(
            extreme={"init": "models/lora/hard", "steps": 5, "lr": 1e-4}
        ),
        "train.curriculum.extreme",
        "degrade.levels",
    ),
    (
        "invalid precision",
        lambda p: p["optim"].update(precision="fp8"),
        "optim.precision",
        "'auto', 'fp32', 'bf16' or 'fp16'",
    ),
    (
        "invalid device",
        lambda p: p["compute"].update(device="tpu"),
        "compute.device",
        "'auto', 'cpu' or 'cuda'",
    ),
    (
        "negative loss balance",
        lambda p: p["optim"]["loss"].update(balance=-1),
        "optim.loss.balance",
        "greater than or equal to 0",
    ),
    (
        "nonexistent pretrained UNet",
        lambda p: p["model"].update(unet="no/such/unet"),
        "model.unet",
        "is not a folder",
    ),
    (
        "nonexistent VAE",
        lambda p: p["model"].update(vae="no/such/vae"),
        "model.vae",
        "is not a folder",
    ),
    (
        "learning rate above 1",
        lambda p: p["train"]["curriculum"]["medium"].update(lr=5.0),
        "train.curriculum.medium.lr",
        "less than or equal to 1",
    ),
    (
        "repeated sweep steps",
        lambda p: p["eval"]["sweep"].update(steps=[25, 25]),
        "eval.sweep.steps",
        "distinct",
    ),
    (
        "interval confidence of 1",
        lambda p: p["eval"]["interval"].update(confidence=1.0),
        "eval.interval.confidence",
        "less than 1",
    ),
    (
        "zero batch size",
        lambda p: p["optim"].update(batch_size=0),
        "optim.batch_size",
        "greater than",
    ),
    ("unknown reader", lambda p: p["loader"].update(reader="hdf5"), "loader.reader", "embeddings"),
    (
        "all loss weights zero",
        lambda p: p["optim"].update(
            loss={"mse": 0, "l1": 0, "charbonnier": 0, "balance": 0, "laplacian": 0}
        ),
        "optim.loss",
        "positive weight",
    ),
    (
        "unfreeze level outside the curriculum",
        lambda p: p["train"]["unfreeze"].update(level="extreme"),
        "train.unfreeze.level",
        "not a curriculum level",
    ),
    (
        "bank label focus above one",
        lambda p: p["base"]["bank"].update(label_focus=1.5),
        "base.bank.label_focus",
        "less than or equal to 1",
    ),
    (
        "a reader trained on the held-out library",
        lambda p: p["digitize_reader"].update(libraries=["matplotlib", "vegalite"]),
        "digitize_reader.libraries",
        "'vegalite' is not a library a reader may train on",
    ),
    (
        "a voter named as the reader it votes beside",
        lambda p: p["digitize_reader"].update(voters=[{"name": "digitize-reader", "steps": 10}]),
        "digitize_reader.voters",
        "each voter needs a name of its own",
    ),
    (
        "a voter's key misspelt",
        lambda p: p["digitize_reader"].update(voters=[{"name": "larger", "stepz": 10}]),
        "digitize_reader.voters",
        "stepz: Extra inputs are not permitted",
    ),
    (
        "a voter trained on the held-out library",
        lambda p: p["digitize_reader"].update(voters=[{"name": "x", "libraries": ["vegalite"]}]),
        "digitize_reader.voters",
        "'vegalite' is not a library a reader may train on",
    ),
]


@pytest.mark.parametrize("name,mutate,key,accepts", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_bad_params_name_the_key(name, mutate, key, accepts):
    params = tiny_params()
    mutate(params)
    with pytest.raises(ParamsError) as caught:
        parse_params(params)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"params.yaml: {key}: "), message
    assert accepts in message, message


def test_every_mutation_stops_a_stage_that_reads_it_before_it_touches_a_file(
    trained_project, tmp_path, capsys
):
    """A good run's outputs, then each bad params.yaml under a command that reads the bad key's
    section (the stages that declare it in turn; base and the two readers, which no stage reads,
    under `bank`, `label-reader` and `digitize-reader`; a misspelt section under any stage):
    exit 2, one line naming the key, and not one byte of data/, models/, metrics/ or logs/
    changed."""
    project = tmp_path / "project"
    shutil.copytree(trained_project, project, symlinks=True)
    before = {
        folder: file_digests(project / folder) for folder in ("data", "models", "metrics", "logs")
    }
    levels = {"shard": "easy", "embed": "hard", "train": "medium"}
    readers: dict[str, list[list[str]]] = {
        "base": [["bank"]],
        "label_reader": [["label-reader"]],
        "digitize_reader": [["digitize-reader"]],
    }
    for stage in STAGES:
        command = [stage.command.replace("_", "-")]
        command += ["--level", levels[command[0]]] if command[0] in levels else []
        for section in sorted({key.split(".")[0] for key in stage.params}):
            readers.setdefault(section, []).append(command)
    every_stage = [commands[0] for commands in readers.values()]
    for index, (name, mutate, key, _) in enumerate(MUTATIONS):
        params = tiny_params()
        mutate(params)
        write_params(project, params)
        commands = readers.get(key.split(".")[0], every_stage)
        command = commands[index % len(commands)]
        capsys.readouterr()
        assert run_cli(project, *command) == 2, (name, command)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"linefuse: error: params.yaml: {key}: "), (
            name,
            err,
        )
    assert len(MUTATIONS) >= 20
    assert {folder: file_digests(project / folder) for folder in before} == before


def test_cli_prints_one_line_and_touches_nothing(tmp_path, capsys):
    params = tiny_params()
    params["data"]["charts"]["count"] = 3
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "generate", "--workers", "1") == 0
    before = sorted(p.name for p in (tmp_path / "data/source").iterdir())
    capsys.readouterr()

    params["data"]["charts"]["count"] = 5
    params["data"]["split"]["train"] = 0.9
    write_params(tmp_path, params)
    assert run_cli(tmp_path, "generate", "--workers", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "linefuse: error: params.yaml: data.split: train + val + test must sum to 1, got 1.3"
    ]
    assert sorted(p.name for p in (tmp_path / "data/source").iterdir()) == before


def test_invalid_yaml_and_missing_file(tmp_path, capsys):
    assert run_cli(tmp_path, "index") == 2
    assert "params.yaml: not found" in capsys.readouterr().err
    (tmp_path / "params.yaml").write_text("data: [unclosed\n")
    assert run_cli(tmp_path, "index") == 2
    assert "not valid YAML at line" in capsys.readouterr().err


def test_unknown_level_and_missing_index(tmp_path, capsys):
    write_params(tmp_path, tiny_params())
    assert run_cli(tmp_path, "shard", "--level", "extreme") == 2
    assert "--level extreme: not in degrade.levels (easy, medium, hard)" in capsys.readouterr().err
    assert run_cli(tmp_path, "shard", "--level", "easy") == 2
    assert "images.parquet is missing; run `linefuse index` first" in capsys.readouterr().err


def test_params_yaml_round_trips_through_yaml():
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert parse_params(raw) == load_params(ROOT / "params.yaml")
