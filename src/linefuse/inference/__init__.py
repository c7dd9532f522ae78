"""Inference: loading a trained base and its adapters, sampling, tiling and the restorer that
evaluate, `linefuse restore` and `linefuse serve` share. Training imports from here, never the
other way round."""
