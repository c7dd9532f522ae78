"""The numpy sampler (the ONNX Runtime path) is diffusers' DDIM as inference/sampler.py runs it:
the same noise schedule, timesteps and steps, to the bit, for every schedule and prediction type
params.yaml accepts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from linefuse.inference import numpy_sampler
from linefuse.inference.sampler import SamplingCancelled, ddim_scheduler, sample
from linefuse.params.full import parse_params
from linefuse.stage import UserError

from conftest import tiny_params


def _model(**update):
    """params.yaml's `model` section with `update` (unchecked: other sections' ranges follow
    model.train_timesteps)."""
    return parse_params(tiny_params()).model.model_copy(update=update)


@pytest.mark.parametrize("schedule", ["squaredcos_cap_v2", "linear", "scaled_linear"])
@pytest.mark.parametrize("timesteps", [1000, 50])
def test_the_noise_schedule_is_diffusers(schedule, timesteps):
    model = _model(beta_schedule=schedule, train_timesteps=timesteps)
    expected = ddim_scheduler(model).alphas_cumprod.numpy()
    assert np.array_equal(numpy_sampler.alphas_cumprod(timesteps, schedule), expected)


@pytest.mark.parametrize("steps", [1, 3, 7, 25, 1000])
def test_the_timesteps_are_diffusers(steps):
    scheduler = ddim_scheduler(_model())
    scheduler.set_timesteps(steps)
    assert np.array_equal(numpy_sampler.timesteps(1000, steps), scheduler.timesteps.numpy())
    with pytest.raises(UserError, match="1001 steps: more than the 1000 timesteps"):
        numpy_sampler.timesteps(1000, 1001)


class _Linear(torch.nn.Module):
    """A stand-in UNet whose output mixes its inputs and the timestep: each step's output
    depends on the latents it is given, so the steps' arithmetic shows."""

    def forward(self, joined, timesteps, encoder_hidden_states):
        noisy, condition = joined[:, :3], joined[:, 3:]
        shift = (timesteps.float() / 1000.0).view(-1, 1, 1, 1)
        return SimpleNamespace(sample=0.75 * noisy - 0.5 * condition + shift)


def _linear(noisy: np.ndarray, condition: np.ndarray, timesteps: np.ndarray) -> np.ndarray:
    shift = (timesteps.astype(np.float32) / np.float32(1000.0)).reshape(-1, 1, 1, 1)
    return np.float32(0.75) * noisy - np.float32(0.5) * condition + shift


@pytest.mark.parametrize("prediction", ["sample", "epsilon", "v_prediction"])
@pytest.mark.parametrize("steps", [1, 2, 5])
def test_sampling_is_diffusers_step_for_step(prediction, steps):
    """The same stand-in model through both samplers: the same x0, to the bit at one step of the
    default `sample` prediction; within float32 rounding otherwise."""
    model = _model(prediction_type=prediction)
    condition = np.random.default_rng(0).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    by_torch = sample(
        _Linear(),
        torch.from_numpy(condition),
        torch.zeros(2, 1, 4),
        ddim_scheduler(model),
        "mean",
        steps,
    ).numpy()
    by_numpy = numpy_sampler.sample(_linear, condition, model, steps)
    assert by_numpy.dtype == np.float32 and by_numpy.shape == condition.shape
    if prediction == "sample" and steps == 1:
        assert np.array_equal(by_numpy, by_torch)
    assert np.allclose(by_numpy, by_torch, rtol=1e-5, atol=1e-5), np.abs(by_numpy - by_torch).max()


def test_a_stop_asked_before_a_step_cancels_sampling():
    asked = []

    def stop_at_the_second() -> bool:
        asked.append(1)
        return len(asked) == 2

    condition = np.zeros((1, 3, 8, 8), np.float32)
    with pytest.raises(SamplingCancelled):
        numpy_sampler.sample(_linear, condition, _model(), 3, stop_at_the_second)
    assert len(asked) == 2
