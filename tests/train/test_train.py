"""pretrain and train@LEVEL: loss falls, LoRA chains through the curriculum, kill-and-resume is
exact."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import chdir
from pathlib import Path

import pytest
import torch
import yaml
from peft import PeftModel
from safetensors.torch import load_file

from linefuse.data.readers import EmbeddedPairs
from linefuse.inference.model import load_base
from linefuse.inference.sampler import ddim_scheduler, restored_from, sample
from linefuse.params.full import parse_params
from linefuse.train.diffusion import noise_scheduler, weighted_loss
from linefuse.train.model import build_unet
from linefuse.train.pretrain import pretrain_job
from linefuse.train.run import DIGESTS_ENV, _warn_if_barely_restoring, validation_losses
from linefuse.train.step import step_draw

from conftest import LEVELS, ROOT, embed_all, run_cli, tiny_params, write_params

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def _steps(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _zero_prediction_val_loss(project: Path, levels) -> float:
    """The val loss (params' weighting) of a model that predicts a zero residual, i.e. that
    returns the blurred input."""
    weights = parse_params(tiny_params()).optim.loss
    losses = []
    for level in levels:
        tensors = EmbeddedPairs(project / "data/embeddings" / level, "val").tensors()
        residual = tensors["sharp"].float() - tensors["blurred"].float()
        losses.append(weighted_loss(torch.zeros_like(residual), residual, weights)[0])
    return float(torch.stack(losses).mean())


def test_each_level_logs_its_validation_curve(trained_project):
    """Every optim.val_every steps the step log, and DVCLive's plots, carry the val loss (the
    same fixed draw each time); the last point is the run's final val_loss."""
    every = tiny_params()["optim"]["val_every"]
    for level in LEVELS:
        logs = trained_project / "logs/train" / level
        records = _steps(logs / "steps.jsonl")
        curve = [(r["step"], r["val_loss"]) for r in records if "val_loss" in r]
        assert [step for step, _ in curve] == [r["step"] for r in records if r["step"] % every == 0]
        assert curve and all(loss > 0 for _, loss in curve)
        final = json.loads((trained_project / f"metrics/train/{level}.json").read_text())
        assert curve[-1][1] == pytest.approx(final["val_loss"], rel=1e-6)
        plotted = (logs / "dvclive/plots/metrics/train/val_loss.tsv").read_text().splitlines()
        assert len(plotted) == len(curve) + 1  # a header, then a row per point


def test_pretrain_lowers_the_loss_and_saves_a_diffusers_folder(trained_project):
    steps = tiny_params()["pretrain"]["steps"]
    records = _steps(trained_project / "logs/pretrain/steps.jsonl")
    assert [r["step"] for r in records] == list(range(5, steps + 5, 5))
    metrics = json.loads((trained_project / "metrics/train/pretrain.json").read_text())
    untrained = _zero_prediction_val_loss(trained_project, LEVELS)
    # trained at t >= 700 (optim.timestep_range) the model must restore
    # from the condition alone, where the noisy target gives nothing away
    assert metrics["val_loss"] < 0.94 * untrained, (metrics["val_loss"], untrained)
    # the same yardstick, as pretrain logs it: 3% of its draws are identity pairs, which cost 0
    assert metrics["val_loss_unchanged"] == pytest.approx(untrained, rel=0.1)
    assert metrics["val_loss"] < 0.94 * metrics["val_loss_unchanged"]
    for record in records:
        assert 0 <= record["data_wait_fraction"] <= 1 and record["samples_per_s"] > 0
        assert record["peak_rss_mb"] > 100
    base = trained_project / "models/base"
    assert sorted(p.name for p in base.iterdir()) == [
        "config.json",
        "diffusion_pytorch_model.safetensors",
        "null_prompt.safetensors",
    ]
    assert metrics["trainable_params"] == metrics["total_params"] > 500_000
    assert metrics["steps"] == steps
    assert not list(trained_project.glob("logs/**/rank*.json"))  # only where DIGESTS_ENV is 1


def test_a_model_that_returns_its_input_is_named_in_a_warning(trained_project, caplog):
    """The untrained tiny UNet predicts a zero residual: exactly the unchanged input's loss."""
    params = parse_params(tiny_params())
    job = pretrain_job(params)
    prompts = EmbeddedPairs(trained_project / "data/embeddings/easy", "val").prompt_embeddings()
    with chdir(trained_project):
        loss, unchanged = validation_losses(
            params, job, build_unet("tiny", 3), noise_scheduler(params.model), prompts, "cpu"
        )
    assert loss == pytest.approx(unchanged, rel=1e-6) and unchanged > 0.01
    with caplog.at_level("WARNING", logger="linefuse"):
        _warn_if_barely_restoring(job, loss, unchanged)
        _warn_if_barely_restoring(job, 0.9 * unchanged, unchanged)
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "100% of what returning the input unchanged scores" in warning
    assert "lower pretrain.lr" in warning


def test_curriculum_adapters_are_peft_folders_and_small(trained_project):
    base = load_base(trained_project / "models/base")
    previous = None
    for level in LEVELS:
        adapter = trained_project / "models/lora" / level
        assert {"adapter_config.json", "adapter_model.safetensors"} <= {
            p.name for p in adapter.iterdir()
        }
        weights = load_file(adapter / "adapter_model.safetensors")
        assert weights and all("lora_" in key for key in weights)
        if previous is not None:
            assert any(not torch.equal(weights[k], previous[k]) for k in weights)
        previous = weights
        metrics = json.loads((trained_project / f"metrics/train/{level}.json").read_text())
        assert 0 < metrics["trainable_fraction"] <= 0.20  # rank 16 on every block: about a seventh
        assert metrics["steps"] == 10 and metrics["resumed_from_step"] == 0
    restored = PeftModel.from_pretrained(base, trained_project / "models/lora/hard")
    assert restored.peft_config["default"].r == tiny_params()["train"]["lora"]["rank"]


def test_residual_target_at_zero_init_reproduces_the_input():
    params = parse_params(tiny_params())
    unet = build_unet("tiny", channels=3)
    blurred = torch.rand(2, 3, 32, 32) * 2 - 1
    x0 = sample(
        unet,
        blurred,
        torch.zeros(2, 1, 32),
        ddim_scheduler(params.model),
        params.model.sample_start,
        steps=4,
        generator=torch.Generator().manual_seed(0),
    )
    assert torch.equal(restored_from(x0, blurred, params.model.target), blurred)


def _copy_project(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    for generated in ("models/lora", "metrics/train", "logs/train", ".linefuse"):
        shutil.rmtree(target / generated, ignore_errors=True)
    return target


def test_balanced_loss_weighs_small_residuals_up_to_the_large_ones():
    """optim.loss.balance: a JPEG-sized residual counts as much as a heavy blur's instead of 10x
    less; balance 0 is the plain mean."""
    from linefuse.params.training import LossWeights

    target = torch.cat([torch.full((1, 3, 8, 8), 0.02), torch.full((1, 3, 8, 8), 0.2)])
    prediction = torch.zeros_like(target)
    plain, terms = weighted_loss(
        prediction, target, LossWeights(mse=0, l1=1, charbonnier=0, balance=0, laplacian=0)
    )
    assert float(plain) == pytest.approx(0.11) and terms["l1"] == pytest.approx(0.11)
    balanced, terms = weighted_loss(
        prediction, target, LossWeights(mse=0, l1=1, charbonnier=0, balance=1, laplacian=0)
    )
    weights = torch.tensor([1 / 0.03, 1 / 0.21])
    weights = weights / weights.mean()
    assert float(balanced) == pytest.approx(float((weights * torch.tensor([0.02, 0.2])).mean()))
    contributions = weights * torch.tensor([0.02, 0.2])
    assert float(contributions[1] / contributions[0]) == pytest.approx(1.43, abs=0.01)  # was 10
    assert terms["l1"] == pytest.approx(0.11)  # the logs keep the plain mean


def test_pixel_weights_and_the_laplacian_term_weigh_what_they_name():
    """pixel_weights scale each pixel's error (the logs keep plain means); optim.loss.laplacian
    ignores an error that is flat and counts one with an edge."""
    from linefuse.params.training import LossWeights

    plain_l1 = LossWeights(mse=0, l1=1, charbonnier=0, balance=0, laplacian=0)
    target = torch.zeros(1, 3, 8, 8)
    prediction = torch.zeros_like(target)
    prediction[..., :2, :] = 0.5  # an error on the top quarter of the rows only
    weights = torch.ones(1, 1, 8, 8)
    weights[..., :2, :] = 3.0
    unweighted, _ = weighted_loss(prediction, target, plain_l1)
    weighted, terms = weighted_loss(prediction, target, plain_l1, pixel_weights=weights)
    assert float(unweighted) == pytest.approx(0.125)
    assert float(weighted) == pytest.approx(0.375) and terms["l1"] == pytest.approx(0.125)

    with_edges = LossWeights(mse=0, l1=1, charbonnier=0, balance=0, laplacian=1)
    flat, terms = weighted_loss(torch.full_like(target, 0.5), target, with_edges)
    assert terms["laplacian"] == pytest.approx(0.0, abs=1e-6)
    assert float(flat) == pytest.approx(0.5)
    edged, terms = weighted_loss(prediction, target, with_edges)
    assert terms["laplacian"] > 0.01 and float(edged) == pytest.approx(0.125 + terms["laplacian"])


def test_step_draws_timesteps_in_range_and_identity_pairs_reproducibly():
    """optim.timestep_range bounds every t; optim.identity_fraction of the samples get the sharp
    image as condition (so a zero residual to learn); the same (step, micro, rank) draws the
    same, another step draws anew."""

    raw = tiny_params()
    raw["optim"].update(timestep_range=[700, 1000], identity_fraction=0.25, start_fraction=0.0)
    params = parse_params(raw)
    blurred, sharp = torch.zeros(4000, 3, 2, 2), torch.ones(4000, 3, 2, 2)
    draw = step_draw(params, blurred, sharp, step=3, micro=0, rank=0)
    assert 700 <= int(draw.timesteps.min()) and int(draw.timesteps.max()) <= 999
    assert float(draw.timesteps.float().std()) > 50  # spread over the range, not one value
    identity = (draw.condition == sharp).flatten(1).all(1)
    assert float(identity.float().mean()) == pytest.approx(0.25, abs=0.03)
    assert torch.equal(draw.x0[identity], torch.zeros_like(draw.x0[identity]))
    assert torch.equal(draw.x0[~identity], torch.ones_like(draw.x0[~identity]))
    again = step_draw(params, blurred, sharp, step=3, micro=0, rank=0)
    assert torch.equal(again.timesteps, draw.timesteps) and torch.equal(again.noise, draw.noise)
    other = step_draw(params, blurred, sharp, step=4, micro=0, rank=0)
    assert not torch.equal(other.timesteps, draw.timesteps)


def test_start_fraction_trains_where_the_sampler_starts():
    """optim.start_fraction of the samples sit at the last timestep with x_t at the prior's mean
    (zero): the input of every sampling run's first step, whatever its step count; the others
    keep their timestep_range draw and their noise."""
    from diffusers import DDIMScheduler

    from linefuse.train.diffusion import noise_scheduler, noisy_and_target

    raw = tiny_params()
    raw["optim"].update(timestep_range=[700, 1000], identity_fraction=0.0, start_fraction=0.5)
    params = parse_params(raw)
    blurred, sharp = torch.zeros(2000, 3, 2, 2), torch.ones(2000, 3, 2, 2)
    draw = step_draw(params, blurred, sharp, step=3, micro=0, rank=0)
    noisy, target = noisy_and_target(
        noise_scheduler(params.model), draw.x0, draw.noise, draw.timesteps
    )
    at_start = noisy.flatten(1).abs().amax(1) < 1e-3
    assert float(at_start.float().mean()) == pytest.approx(0.5, abs=0.04)
    assert torch.equal(draw.timesteps[at_start], torch.full_like(draw.timesteps[at_start], 999))
    assert float(noisy[~at_start].std()) > 0.9  # the rest: noisy draws over the range
    assert torch.equal(target, draw.x0)  # prediction_type sample: x0 either way
    for steps in (1, 4, 25):
        sampler = DDIMScheduler(num_train_timesteps=1000, timestep_spacing="trailing")
        sampler.set_timesteps(steps)
        assert int(sampler.timesteps[0]) == 999
    raw["optim"]["start_fraction"] = 0.0
    plain = step_draw(parse_params(raw), blurred, sharp, step=3, micro=0, rank=0)
    assert torch.equal(plain.noise[~at_start], draw.noise[~at_start])
    assert torch.equal(plain.timesteps[~at_start], draw.timesteps[~at_start])


def test_kill_and_resume_ends_with_the_same_weights(trained_project, tmp_path):
    """SIGKILL train@easy after its first checkpoint; the rerun resumes and matches a clean run."""
    params = tiny_params()
    params["train"]["curriculum"]["easy"]["steps"] = 16
    params["optim"]["checkpoint_every"] = 4
    clean = _copy_project(trained_project, tmp_path / "clean")
    killed = _copy_project(trained_project, tmp_path / "killed")
    for project in (clean, killed):
        write_params(project, params)
    assert run_cli(clean, "train", "--level", "easy") == 0

    process = subprocess.Popen(
        ["linefuse", "train", "--level", "easy"],
        cwd=killed,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = killed / ".linefuse/state/train-easy"
    deadline = time.time() + 120
    while not list(state.glob("step-*")) and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "models/lora/easy").exists(), "killed before it could finish"
    assert list(state.glob("step-*"))

    assert run_cli(killed, "train", "--level", "easy") == 0
    metrics = json.loads((killed / "metrics/train/easy.json").read_text())
    assert metrics["resumed_from_step"] >= 4
    assert not state.exists()
    resumed = load_file(killed / "models/lora/easy/adapter_model.safetensors")
    uninterrupted = load_file(clean / "models/lora/easy/adapter_model.safetensors")
    assert resumed.keys() == uninterrupted.keys()
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in resumed)


def test_non_finite_loss_stops_with_one_line(trained_project, tmp_path, capsys):
    """NaNs in the cached inputs make the loss non-finite: one line, no adapter written."""
    from safetensors.torch import save_file

    project = _copy_project(trained_project, tmp_path / "diverge")
    cached = project / "data/embeddings/easy/train.safetensors"
    tensors = load_file(cached)
    tensors["blurred"] = torch.full_like(tensors["blurred"], float("nan"))
    cached.unlink()  # the copy may share the inode with DVC's cache or the source project
    save_file(tensors, cached)
    capsys.readouterr()
    assert run_cli(project, "train", "--level", "easy") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "linefuse: error: train@easy: loss became nan at step 1; no checkpoint yet; "
        "lower the learning rate or use optim.precision: fp32"
    )
    assert not (project / "models/lora/easy").exists()


def test_two_processes_see_different_samples_and_end_identical(trained_project, tmp_path):
    """The train stage's own command (dvc.yaml) with launch.processes: 2 and the DDP config."""
    project = _copy_project(trained_project, tmp_path / "ddp")
    shutil.copytree(
        ROOT / "workflow/accelerate", project / "workflow/accelerate", dirs_exist_ok=True
    )
    params = tiny_params()
    params["launch"] = {"processes": 2, "config": "workflow/accelerate/ddp.yaml"}
    write_params(project, params)
    command = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["train"]["do"]["cmd"]
    for name, value in (
        ("launch.config", "workflow/accelerate/ddp.yaml"),
        ("launch.processes", "2"),
        ("key", "easy"),
    ):
        command = command.replace(f"${{{name}}}", value)
    assert command.startswith("python -m linefuse.launch ") and "--num_processes 2 " in command
    env = {**ENV, DIGESTS_ENV: "1"}  # each rank writes rank{i}.json
    done = subprocess.run(
        command, shell=True, cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    rank1 = [line for line in done.stderr.splitlines() if line.startswith("[rank1]")]
    assert done.returncode == 0, "\n".join(rank1[-20:]) + done.stderr[-3000:]
    ranks = [json.loads((project / f"logs/train/easy/rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["sample_digest"] != ranks[1]["sample_digest"]
    assert ranks[0]["samples_seen"] == ranks[1]["samples_seen"] == 10 * 8
    assert ranks[0]["trainable_weights_digest"] == ranks[1]["trainable_weights_digest"]
    metrics = json.loads((project / "metrics/train/easy.json").read_text())
    assert metrics["processes"] == 2


def test_latent_mode_end_to_end_with_a_users_pretrained_folders(tiny_project, tmp_path):
    """A tiny random VAE and UNet saved with save_pretrained: the path a Stable Diffusion folder
    takes."""
    from diffusers import AutoencoderKL, UNet2DConditionModel

    torch.manual_seed(0)
    AutoencoderKL(
        block_out_channels=(8, 16),
        down_block_types=("DownEncoderBlock2D",) * 2,
        up_block_types=("UpDecoderBlock2D",) * 2,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=32,
    ).save_pretrained(tmp_path / "sd/vae")
    users_unet = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        block_out_channels=(16, 32),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32,
        layers_per_block=1,
        norm_num_groups=8,
        attention_head_dim=8,
    )
    users_unet.save_pretrained(tmp_path / "sd/unet")

    project = tmp_path / "project"
    shutil.copytree(tiny_project / "data", project / "data")
    params = tiny_params()
    params["model"].update(unet=str(tmp_path / "sd/unet"), vae=str(tmp_path / "sd/vae"))
    params["train"]["lora"]["blocks"] = []
    write_params(project, params)
    embed_all(project, params)
    manifest = json.loads((project / "data/embeddings/easy/manifest.json").read_text())
    assert manifest["mode"] == "latent" and manifest["splits"]["train"]["shape"] == [4, 16, 16]

    assert run_cli(project, "pretrain") == 0
    base = load_base(project / "models/base")
    assert base.config.in_channels == 8
    noisy, condition = torch.randn(2, 4, 16, 16), torch.randn(2, 4, 16, 16)
    timesteps, prompts = torch.tensor([10, 500]), torch.zeros(2, 1, 32)
    with torch.no_grad():
        widened = base(torch.cat([noisy, condition], 1), timesteps, prompts).sample
        original = users_unet(noisy, timesteps, prompts).sample
    assert torch.allclose(widened, original, atol=1e-5)

    assert run_cli(project, "train", "--level", "easy") == 0
    adapted = PeftModel.from_pretrained(
        load_base(project / "models/base"), project / "models/lora/easy"
    )
    metrics = json.loads((project / "metrics/train/easy.json").read_text())
    assert metrics["steps"] == 10 and 0 < metrics["trainable_fraction"] < 0.5
    assert sum("lora_A" in name for name, _ in adapted.named_parameters()) > 0


def _adapter(project: Path, level: str = "easy") -> dict:
    return load_file(project / "models/lora" / level / "adapter_model.safetensors")


def test_readers_and_the_ram_cache_feed_the_same_batches(trained_project, tmp_path):
    """Embeddings stored as float32 and the LMDB reader give identical weights; so does the
    cache."""
    params = tiny_params()
    params["embed"]["dtype"] = "float32"
    weights = {}
    for name, loader in {
        "embeddings": {},
        "lmdb": {"reader": "lmdb"},
        "cached": {"cache_gb": 0.5},
    }.items():
        project = _copy_project(trained_project, tmp_path / name)
        shutil.rmtree(project / "data/embeddings/easy")
        run_params = json.loads(json.dumps(params))
        run_params["loader"].update(loader)
        write_params(project, run_params)
        assert run_cli(project, "embed", "--level", "easy") == 0
        assert run_cli(project, "train", "--level", "easy") == 0
        weights[name] = _adapter(project)
        if name == "cached":
            records = _steps(project / "logs/train/easy/steps.jsonl")
            assert records[-1]["cache_hit_rate"] is not None and records[-1]["cache_hit_rate"] >= 0
    for name in ("lmdb", "cached"):
        assert all(torch.equal(weights[name][k], weights["embeddings"][k]) for k in weights[name])


def test_bf16_grad_accum_and_checkpointing_run_and_learn(trained_project, tmp_path):
    project = _copy_project(trained_project, tmp_path / "variant")
    params = tiny_params()
    params["optim"].update(grad_accum=2, precision="bf16", gradient_checkpointing=True)
    # 2 steps of 2 micro-batches: where the CPU lacks native bf16 (AVX2 alone), each costs many
    # fp32 steps
    params["train"]["curriculum"]["easy"]["steps"] = 2
    write_params(project, params)
    # a process of its own, as under dvc: accelerate's precision is fixed once per process
    _train_easy(project)
    metrics = json.loads((project / "metrics/train/easy.json").read_text())
    assert metrics["steps"] == 2 and torch.isfinite(torch.tensor(metrics["final_loss"]))
    assert metrics["precision"] == "bf16" and metrics["precision_reason"].startswith("set to bf16")
    weights = _adapter(project)
    assert any(float(w.abs().sum()) > 0 for k, w in weights.items() if "lora_B" in k)


def _train_easy(project: Path) -> None:
    done = subprocess.run(
        ["linefuse", "train", "--level", "easy"],
        cwd=project,
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]


class _LoggedFiles(http.server.SimpleHTTPRequestHandler):
    requested: list[str] = []

    def log_message(self, format, *args):
        type(self).requested.append(self.path)


def test_webdataset_streams_shards_over_http_to_the_same_weights(trained_project, tmp_path):
    """loader.shard_urls: the tars served on loopback (none left in the project) train the
    same adapter, byte for byte, as the local tars."""
    params = tiny_params()
    params["loader"].update(reader="webdataset", shuffle_buffer=16)
    local = _copy_project(trained_project, tmp_path / "local")
    write_params(local, params)
    assert run_cli(local, "train", "--level", "easy") == 0

    bucket = tmp_path / "bucket"
    streamed = _copy_project(trained_project, tmp_path / "streamed")
    shutil.move(streamed / "data/shards/easy/wds", bucket)
    tars = sorted(p.name for p in bucket.glob("train-*.tar"))
    assert len(tars) >= 2
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_LoggedFiles, directory=str(bucket))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/train-{{000000..{len(tars) - 1:06d}}}.tar"
        params["loader"]["shard_urls"] = {"easy": url}
        write_params(streamed, params)
        assert run_cli(streamed, "train", "--level", "easy") == 0
    finally:
        server.shutdown()
    assert sorted(set(_LoggedFiles.requested)) == [f"/{name}" for name in tars]
    assert not (streamed / "data/shards/easy/wds").exists()
    streamed_weights, local_weights = _adapter(streamed), _adapter(local)
    assert streamed_weights.keys() == local_weights.keys()
    assert all(torch.equal(streamed_weights[k], local_weights[k]) for k in local_weights)
    assert any(float(w.abs().sum()) > 0 for k, w in local_weights.items() if "lora_B" in k)


def test_shard_urls_expand_braces_and_open_pipes(tiny_project):
    """pipe: commands and {a..b} ranges reach WebDataset as separate shards, in order."""
    from linefuse.data.readers import shard_urls, webdataset_pairs
    from linefuse.train.trainset import shard_stream_urls

    local = shard_urls(tiny_project / "data/shards/easy", "train")
    folder = Path(local[0]).parent
    spec = f"pipe:cat {folder}/train-{{000000..{len(local) - 1:06d}}}.tar"
    urls = shard_stream_urls(
        [Path("data/shards/easy"), tiny_project / "data/shards/medium"], "train", {"easy": spec}
    )
    assert urls[: len(local)] == [f"pipe:cat {path}" for path in local]
    assert urls[len(local) :] == shard_urls(tiny_project / "data/shards/medium", "train")
    keys = [meta["key"] for _, _, meta in webdataset_pairs(urls[: len(local)])]
    assert keys == [meta["key"] for _, _, meta in webdataset_pairs(local)]
    assert len(keys) > 16


def test_memory_warning_names_the_key(tmp_path, caplog):
    from linefuse.train.telemetry import StepLogger

    logger = StepLogger(
        tmp_path,
        "train@easy",
        every=1,
        memory_warn_fraction=1e-6,
        device=torch.device("cpu"),
        enabled=True,
        resume=False,
    )
    logger.add({"loss": 0.5}, samples=8, data_wait_s=0.01)
    with caplog.at_level("WARNING", logger="linefuse"):
        record = logger.flush(step=1, lr=1e-3)
        logger.flush(step=2, lr=1e-3)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "optim.memory_warn_fraction" in warnings[0]
    assert record["peak_rss_mb"] > 50 and record["loss"] == 0.5
    logger.close({"steps": 2})
    lines = (tmp_path / "steps.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2]
    assert (tmp_path / "dvclive/plots/metrics/train/loss.tsv").is_file()


def test_per_domain_adapters_see_only_their_domain_and_merge_exactly(
    trained_project, tmp_path, monkeypatch
):
    """train.adapters: per_domain -> one adapter per domain, trained on that domain's samples
    only, and a `cat` merge whose update is exactly the weighted sum of theirs."""
    from linefuse.inference.model import domain_adapters
    from linefuse.train.trainset import map_dataset

    monkeypatch.setenv(DIGESTS_ENV, "1")  # each adapter's logs hold rank0.json
    project = _copy_project(trained_project, tmp_path / "domains")
    params = tiny_params()
    assert run_cli(project, "train-domains") == 0  # curriculum mode: a manifest listing none
    assert domain_adapters(project / "models/domains") == {"adapters": {}, "combined": None}

    domains, weights = ["gaussian", "compression"], [0.75, 0.5]
    params["train"].update(adapters="per_domain")
    params["train"]["per_domain"].update(domains=domains, steps=5, weights=weights)
    write_params(project, params)
    assert run_cli(project, "train-domains") == 0
    found = domain_adapters(project / "models/domains")
    assert set(found["adapters"]) == set(domains) and found["combined"] is not None

    dirs = [project / "data/embeddings" / level for level in LEVELS]
    everything = map_dataset("embeddings", dirs, "train")
    gaussian = map_dataset("embeddings", dirs, "train", "gaussian")
    keys = [key for part in everything.datasets for key in part.keys]
    assert len(gaussian) == sum("_gaussian_" in key for key in keys) == len(keys) // 5
    assert all(
        "_gaussian_" in part.dataset.keys[i] for part in gaussian.datasets for i in part.indices
    )
    seen = json.loads((project / "logs/train/domains/gaussian/rank0.json").read_text())
    assert seen["samples_seen"] == 5 * params["optim"]["batch_size"]

    def merged(adapter: Path) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            unet = PeftModel.from_pretrained(load_base(project / "models/base"), str(adapter))
            return {k: v.clone() for k, v in unet.merge_and_unload().state_dict().items()}

    base = load_base(project / "models/base").state_dict()
    own = {domain: merged(found["adapters"][domain]) for domain in domains}
    combined = merged(found["combined"])
    changed = [k for k in base if not torch.equal(own["gaussian"][k], base[k])]
    targets = tuple(params["train"]["lora"]["target_modules"])  # train.lora.blocks: [] = everywhere
    assert changed and all(k.rsplit(".", 1)[0].endswith(targets) for k in changed)
    for key in changed:
        deltas = (w * (own[d][key] - base[key]) for d, w in zip(domains, weights, strict=True))
        expected = base[key] + sum(deltas)
        torch.testing.assert_close(combined[key], expected, atol=1e-6, rtol=1e-5)
