"""linefuse profile: every block timed, shares add up, delays land in their own row, nothing
written."""

from __future__ import annotations

import json
from contextlib import chdir

import pytest
import torch

import linefuse.train.profile

from conftest import file_digests, run_cli, tiny_params, write_params

DELAY_S = 0.05
BLOCKS = (
    [f"down_blocks.{i}" for i in range(3)] + ["mid_block"] + [f"up_blocks.{i}" for i in range(3)]
)


def _profile(project, out, *argv: str) -> dict:
    assert run_cli(project, "profile", "--steps", "3", "--json", str(out), *argv) == 0
    return json.loads(out.read_text())


def test_profile_times_every_block_and_writes_nothing(trained_project, tmp_path, capsys):
    before = file_digests(trained_project)
    report = _profile(trained_project, tmp_path / "out.json")
    assert file_digests(trained_project) == before
    assert (report["job"], report["lora"], report["steps"]) == ("train@easy", True, 3)
    names = [row["name"] for row in report["rows"]]
    assert names == (
        ["data loading", "forward stem/head"]
        + [f"forward {b}" for b in BLOCKS]
        + [f"backward {b}" for b in reversed(BLOCKS)]
        + ["backward stem/head", "optimizer step", "other"]
    )
    shares = [row["percent"] for row in report["rows"]]
    assert all(share >= 0 for share in shares) and sum(shares) == pytest.approx(100, abs=0.5)
    printed = capsys.readouterr().out
    assert "train@easy (LoRA): 3 steps timed after 2 untimed warm-up steps" in printed
    assert all(name in printed for name in names)


class _Clock:
    """Moves only when a delay is injected, so the profile measures those delays alone,
    however busy the machine is."""

    def __init__(self):
        self.seconds = 0.0

    def perf_counter(self) -> float:
        return self.seconds

    def sleep(self, seconds: float) -> None:
        self.seconds += seconds


def test_injected_delays_land_in_their_own_rows(trained_project, tmp_path, monkeypatch):
    """Delays inside two blocks (between the profiler's hooks and markers) and in the batch
    stream: each must show up in its own row and nowhere else."""
    clock = _Clock()
    make_model, make_data = (
        linefuse.train.profile.training_model,
        linefuse.train.profile.shard_data,
    )

    class SleepInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor):
            return tensor.view_as(tensor)

        @staticmethod
        def backward(ctx, grad):
            clock.sleep(DELAY_S)
            return grad

    def slow_model(*args):
        model = make_model(*args)
        unet = model.get_base_model()
        mid, up = unet.mid_block, unet.up_blocks[1]
        mid_forward, up_forward = mid.forward, up.forward
        mid.forward = lambda *a, **k: (clock.sleep(DELAY_S), mid_forward(*a, **k))[1]
        # the LoRA on up_blocks.1 makes a gradient reach its output
        up.forward = lambda *a, **k: SleepInBackward.apply(up_forward(*a, **k))
        return model

    def slow_data(*args):
        stream, *rest = make_data(*args)
        batches = stream.batches
        stream.batches = lambda: ((clock.sleep(DELAY_S), batch)[1] for batch in batches())
        return stream, *rest

    monkeypatch.setattr(linefuse.train.profile, "time", clock)
    monkeypatch.setattr(linefuse.train.profile, "training_model", slow_model)
    monkeypatch.setattr(linefuse.train.profile, "shard_data", slow_data)
    report = _profile(trained_project, tmp_path / "slow.json")
    delayed = {"data loading", "forward mid_block", "backward up_blocks.1"}
    for row in report["rows"]:
        expected = 1000 * DELAY_S if row["name"] in delayed else 0
        assert row["ms_per_step"] == pytest.approx(expected, abs=1e-6), row
    assert report["step_ms"] == pytest.approx(3000 * DELAY_S)


def test_the_profiled_step_trains_as_the_loop_does(trained_project, tmp_path):
    """train.step.training_step, the loop's own step (the profiler's and the benchmarks'), run
    outside the loop from the same start over the same batches, ends on the loop's train@easy
    adapter, bit for bit."""
    from accelerate.utils import set_seed
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    from linefuse.params.full import load_params
    from linefuse.train.curriculum import train_job
    from linefuse.train.diffusion import noise_scheduler
    from linefuse.train.profile import training_model
    from linefuse.train.run import make_accelerator, make_optimizer, make_schedule
    from linefuse.train.step import Trainer, training_step
    from linefuse.train.trainset import shard_data

    with chdir(trained_project):
        params = load_params("params.yaml")
        job = train_job(params, "easy")
        accelerator, _, _ = make_accelerator(params, tmp_path)
        set_seed(params.optim.seed)
        stream, prompt_table, channels, _ = shard_data(params, job, accelerator)
        model = training_model(params, job, channels)
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = make_optimizer(params, trainable, job.lr)
        schedule = make_schedule(params, job, optimizer, accelerator.num_processes)
        model, optimizer, schedule = accelerator.prepare(model, optimizer, schedule)
        noise = noise_scheduler(params.model)
        trainer = Trainer(params, accelerator, noise, model, optimizer, schedule, trainable)
        batches = stream.batches()
        model.train()
        for step in range(job.steps):
            for micro in range(params.optim.grad_accum):
                blurred, sharp, prompt_index = next(batches)
                training_step(trainer, blurred, sharp, prompt_table[prompt_index], step, micro)
        loop = load_file(job.out_dir / "adapter_model.safetensors")
    stepped = get_peft_model_state_dict(accelerator.unwrap_model(model))
    assert loop.keys() == stepped.keys()
    assert all(torch.equal(loop[key], stepped[key]) for key in loop)


def _part(layer_name: str) -> str:
    """The block a UNet layer belongs to, or stem/head."""
    return next((block for block in BLOCKS if layer_name.startswith(block + ".")), "stem/head")


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_each_layers_backward_runs_inside_its_blocks_window(trained_project, monkeypatch):
    """The premise of the backward split, checked on the full fine-tune (a gradient through every
    layer): each trainable layer's backward starts after the marker that opens its block's
    window (stem/head for conv_in, the time embedding, conv_out) and before the next one fires."""
    events: list[tuple[str, str]] = []
    make_model, mark = (
        linefuse.train.profile.training_model,
        linefuse.train.profile.StepProfiler.mark,
    )

    def watched_model(*args):
        model = make_model(*args)
        for name, layer in model.named_modules():
            if any(p.requires_grad for p in layer.parameters(recurse=False)):
                part = _part(name)
                layer.register_full_backward_pre_hook(
                    lambda *_, part=part: events.append(("layer", part))
                )
        return model

    def marking(profiler, label):
        events.append(("marker", label))
        mark(profiler, label)

    monkeypatch.setattr(linefuse.train.profile, "training_model", watched_model)
    monkeypatch.setattr(linefuse.train.profile.StepProfiler, "mark", marking)
    assert run_cli(trained_project, "profile", "--full", "--steps", "1") == 0
    window, seen = "stem/head", set()
    for kind, label in events:
        if kind == "marker":
            window = label
        else:
            assert label == window, (label, window)
            seen.add(label)
    assert seen == {*BLOCKS, "stem/head"}


@pytest.mark.parametrize(
    "argv,error",
    [
        (["--level", "nosuch"], "--level nosuch: not in train.curriculum (easy, medium, hard)"),
        (["--steps", "0"], "--steps 0: needs at least 1"),
    ],
)
def test_a_bad_argument_is_one_line(trained_project, capsys, argv, error):
    assert run_cli(trained_project, "profile", *argv) == 2
    printed = capsys.readouterr().err
    assert printed.startswith(f"linefuse: error: {error}") and printed.count("\n") == 1


@pytest.mark.parametrize(
    "argv,error", [([], "models/base is missing"), (["--full"], "data/embeddings/easy is missing")]
)
def test_missing_inputs_are_one_line(tmp_path, capsys, argv, error):
    write_params(tmp_path, tiny_params())
    assert run_cli(tmp_path, "profile", *argv) == 2
    printed = capsys.readouterr().err
    assert printed.startswith(f"linefuse: error: {error}") and printed.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]
