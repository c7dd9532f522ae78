"""params.yaml's `compute` section: the device the model runs on."""

from __future__ import annotations

from typing import Literal

from linefuse.params import DEVICES, Strict


class ComputeParams(Strict):
    """Where the model runs (embed, training, evaluate, restore, serve); `auto` takes the CUDA GPU
    when one is visible, else the CPU, and each stage logs the choice with its reason."""

    device: Literal[DEVICES]
