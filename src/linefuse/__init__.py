"""LineFuse: diffusion restoration of blurred line charts. `from linefuse import
LineFusePipeline` restores from Python (inference/pipeline.py); the stages and the CLI import
their own modules, so importing the package loads no model library."""

from __future__ import annotations


def __getattr__(name: str):
    if name == "LineFusePipeline":
        from linefuse.inference.pipeline import LineFusePipeline

        return LineFusePipeline
    raise AttributeError(f"module 'linefuse' has no attribute {name!r}")
