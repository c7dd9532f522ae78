"""The base's batches: sharp bank crops degraded on the training device, with their tick labels.

A loader batch of `linefuse.base.bank.BankCrops` holds sharp uint8 crops and what the sidecar
says of their tick labels. On the device each crop draws its (domain, level) and is degraded by
`degrade_torch`, from a generator seeded by (optim.seed, step, micro-batch, rank): a resumed or
re-run step degrades alike, whatever the loader workers did (on one kind of device: a GPU's
generator draws otherwise than a CPU's). The labels become what the loss
reads (train/step.py's TextTargets): a pixel weight over their boxes and the (box, text) pairs
the label reader's CTC loss scores the restoration on.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from linefuse.data.degrade_torch import degrade_batch, draw_plan
from linefuse.train.step import TextTargets

if TYPE_CHECKING:
    from linefuse.params.full import Params


def step_generator(params: Params, step: int, micro: int, rank: int) -> torch.Generator:
    """The CPU generator of one micro-batch's degradations, from a hash of its coordinates."""
    key = json.dumps(["degrade", params.optim.seed, step, micro, rank]).encode()
    return torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))


def device_generator(generator: torch.Generator, device: torch.device) -> torch.Generator:
    """A generator on `device`, seeded from the CPU `generator`: the per-pixel draws of a
    degradation are made where the pixels are."""
    seed = int(torch.randint(2**62, (1,), generator=generator))
    return torch.Generator(device=device).manual_seed(seed)


def device_pairs(
    params: Params, batch, device: torch.device, generator: torch.Generator
) -> tuple[Tensor, Tensor, TextTargets]:
    """(blurred, sharp, labels) of a BankCrops batch, in [-1, 1] on `device`."""
    sharp_uint8, mask, boxes, targets, lengths = (part.to(device) for part in batch)
    sharp = sharp_uint8.float() / 255.0
    base = params.base
    plan = draw_plan(len(sharp), params.degrade, base.light, base.light_fraction, generator)
    blurred = degrade_batch(sharp, plan, device_generator(generator, device))
    present = lengths > 0
    sample = present.nonzero()[:, 0].to(boxes.dtype)
    labels = TextTargets(
        mask=mask.float(),
        boxes=torch.cat([sample[:, None], boxes[present]], dim=1),
        targets=targets[present],
        lengths=lengths[present],
    )
    return blurred * 2 - 1, sharp * 2 - 1, labels
