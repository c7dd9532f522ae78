"""Build or load the conditional UNet, widen its input for the condition, and inject LoRA."""

from __future__ import annotations

import json
from pathlib import Path

TINY_CONFIG = Path(__file__).parent / "configs" / "tiny_unet.json"


def unet_config(spec: str) -> dict:
    """The UNet's diffusers config: the repo's tiny one, or `config.json` of a local folder."""
    path = TINY_CONFIG if spec == "tiny" else Path(spec) / "config.json"
    return json.loads(path.read_text())
