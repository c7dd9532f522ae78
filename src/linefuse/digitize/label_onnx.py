"""digitize's label readers on ONNX Runtime: each shipped reader (zoo/<digitize_reader.name>
and its voters') exported beside its safetensors, and read there with numpy crops
(digitize/label_crops.py), so that `linefuse digitize` and the service's /digitize load neither
torch nor diffusers.

`linefuse digitize-reader` exports each reader it trains, so the ONNX file never lags the
weights; `python -m linefuse.digitize.label_onnx` exports the shipped ones again on their own.
The graph takes grey crops (N, 1, height, width) in [-1, 1], any N, and gives the CTC logits
(N, width / 2, classes); a test holds its readings to the torch reader's.
"""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path

import numpy as np

from linefuse import paths
from linefuse.data.labels import decode
from linefuse.data.transforms import normalise_array
from linefuse.digitize.label_crops import crop_labels

ONNX_FILE = "model.onnx"
OPSET = 17  # what ONNX Runtime 1.17 and later run, as the restorer's export
# one thread reads a chart's 32 crops in 16 ms where two took 10.5 on an idle 2-core AMD EPYC
# (AVX2), but 74 ms where two took 93 with both cores busy, as they are beside evaluate's forked
# scorers, Tesseract or a server's restoration: a small share of digitizing a chart either way,
# and one thread's sums are the same in every worker
THREADS = 1


def export_reader(folder: Path) -> Path:
    """`folder`'s reader (a LabelReader's save_pretrained) exported to folder/ONNX_FILE, written
    whole or not at all; returns its path."""
    import torch

    from linefuse.digitize.label_reader import LabelReader

    reader = LabelReader.from_pretrained(str(folder)).eval()
    crops = torch.zeros(2, 1, reader.config.height, reader.config.width)
    target = Path(folder) / ONNX_FILE
    partial = target.with_name(f"{ONNX_FILE}.tmp")
    with warnings.catch_warnings():
        # the trace's notes on GroupNorm's and the GRU's shape checks (every crop has the one
        # size), the exporter's that a GRU over inputs of varying lengths may not run at another
        # batch size (each crop is one length: it does), and its own deprecation
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            reader,
            (crops,),
            str(partial),
            input_names=["crops"],
            output_names=["logits"],
            dynamic_axes={"crops": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )
    return partial.replace(target)


@cache
def _session(name: str):
    """The shipped reader `name`'s ONNX Runtime session, made once per process."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = THREADS
    graph = paths.zoo_model(name) / ONNX_FILE
    return onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


def read_labels(
    image: np.ndarray, boxes: np.ndarray, name: str = paths.DIGITIZE_READERS[0]
) -> list[str]:
    """What the shipped reader `name` reads at each of `boxes` (N, 4: left, top, right, bottom)
    in the uint8 RGB `image` (H, W, 3), by greedy CTC decoding."""
    if len(boxes) == 0:
        return []
    session = _session(name)
    _, _, height, width = session.get_inputs()[0].shape
    crops = crop_labels(normalise_array(image[None])[0], boxes, height, width)
    (logits,) = session.run(None, {"crops": crops})
    return [decode(path) for path in logits.argmax(-1)]


if __name__ == "__main__":
    for reader in paths.DIGITIZE_READERS:
        print(export_reader(paths.zoo_model(reader)))
