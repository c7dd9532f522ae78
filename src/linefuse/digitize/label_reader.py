"""The label reader: a small CRNN that reads tick labels, and the CTC loss it gives restorations.

A restorer can return sharp-looking but wrong digits; Tesseract (digitize/ocr.py) scores that
after the fact, while this reader's CTC loss on the restored label crops can be added to the
pixel loss during training (as NAF-DPM does with its CRNN). It reads grey crops of a fixed height
and width cut by `crop_labels`, the same way for training the reader and for the loss, and
predicts data/labels.py's ALPHABET (class 0 is CTC's blank).

Shipped in linefuse/zoo/<label_reader.name> as a diffusers folder (config.json + safetensors)
with a model card; `linefuse label-reader` (make label-reader) remakes it. digitize's reader
(zoo/<digitize_reader.name>) ships as ONNX too, and digitize reads it without torch, its crops
cut in numpy (digitize/label_onnx.py, label_crops.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from torch import Tensor, nn

from linefuse.data.labels import ALPHABET, decode
from linefuse.digitize.label_crops import LUMA, MARGIN


class LabelReader(ModelMixin, ConfigMixin):
    """A CRNN: conv blocks over a (1, height, width) crop in [-1, 1], the height pooled away,
    a bidirectional GRU along the width, and a linear layer to len(ALPHABET) + 1 classes.

    Args:
        height: crop rows; a multiple of 8 (three 2x poolings of the height).
        width: crop columns; a multiple of 2: width / 2 CTC time steps, a few per glyph, so
            repeated digits ("10000") keep a blank between them.
        channels: output channels of the four conv blocks.
        hidden: the GRU's hidden size per direction.
    """

    @register_to_config
    def __init__(
        self,
        height: int = 16,
        width: int = 64,
        channels: tuple[int, ...] = (16, 32, 64, 64),
        hidden: int = 48,
    ):
        super().__init__()
        c1, c2, c3, c4 = channels
        # GroupNorm, not BatchNorm: the same output in train and eval mode, so a frozen reader
        # inside another model's training loop behaves as it was scored
        self.convs = nn.Sequential(
            _block(1, c1), nn.MaxPool2d(2),  # H/2, W/2
            _block(c1, c2), nn.MaxPool2d((2, 1)),  # H/4, W/2
            _block(c2, c3), nn.MaxPool2d((2, 1)),  # H/8, W/2
            _block(c3, c4),
        )  # fmt: skip
        self.rnn = nn.GRU(c4, hidden, batch_first=True, bidirectional=True)
        self.classify = nn.Linear(2 * hidden, len(ALPHABET) + 1)

    def forward(self, crops: Tensor) -> Tensor:
        """(N, 1, height, width) crops -> (N, width / 2, classes) logits."""
        features = self.convs(crops).mean(dim=2)  # the height pooled: (N, C, T)
        sequence, _ = self.rnn(features.transpose(1, 2))
        return self.classify(sequence)


def _block(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, padding=1), nn.GroupNorm(4, outputs), nn.ReLU(inplace=True)
    )


def crop_labels(images: Tensor, boxes: Tensor, height: int, width: int) -> Tensor:
    """Differentiable grey crops (N, 1, height, width) in [-1, 1] of `images` (B, 3, H, W) in
    [-1, 1] at `boxes` (N, 5): (batch index, left, top, right, bottom) in image pixels, y down.

    Each box, widened by MARGIN of its height, is scaled to the crop's height (or, if wider than
    the crop allows, to its width), left-aligned and vertically centred; all outside the widened
    box is white, so "5" and "1000" keep their glyphs' size and nothing of the chart around
    them shows. Bilinear sampling (grid_sample), so gradients flow back to the images.
    """
    grey = torch.einsum("bchw,c->bhw", images, images.new_tensor(LUMA)).unsqueeze(1)
    index = boxes[:, 0].long()
    left, top, right, bottom = boxes[:, 1:].to(images.dtype).unbind(1)
    margin = MARGIN * (bottom - top)
    left, right, top, bottom = left - margin, right + margin, top - margin, bottom + margin
    scale = torch.maximum((bottom - top) / height, (right - left) / width)  # image px per crop px
    x0, y0 = left, (top + bottom) / 2 - scale * height / 2
    size_h, size_w = images.shape[-2:]
    # affine_grid maps the crop's normalised coordinates u in [-1, 1] (pixel centres at
    # (2j + 1) / width - 1) to the image's: x = x0 + scale * (u + 1) * width / 2, then 2x / W - 1
    theta = torch.zeros(len(boxes), 2, 3, dtype=images.dtype, device=images.device)
    theta[:, 0, 0] = scale * width / size_w
    theta[:, 0, 2] = 2 * (x0 + scale * width / 2) / size_w - 1
    theta[:, 1, 1] = scale * height / size_h
    theta[:, 1, 2] = 2 * (y0 + scale * height / 2) / size_h - 1
    grid = F.affine_grid(theta, [len(boxes), 1, height, width], align_corners=False)
    # sampled as (grey - 1) with zero padding and shifted back: white beyond the image's edge
    crops = F.grid_sample(grey[index] - 1, grid, align_corners=False, padding_mode="zeros") + 1
    xs = x0[:, None] + scale[:, None] * (torch.arange(width, device=images.device) + 0.5)
    ys = y0[:, None] + scale[:, None] * (torch.arange(height, device=images.device) + 0.5)
    inside_x = (xs >= left[:, None]) & (xs <= right[:, None])
    inside_y = (ys >= top[:, None]) & (ys <= bottom[:, None])
    inside = (inside_y[:, :, None] & inside_x[:, None, :]).unsqueeze(1)
    return torch.where(inside, crops, torch.ones_like(crops))


def ctc_loss(
    reader: LabelReader, images: Tensor, boxes: Tensor, targets: Tensor, lengths: Tensor
) -> Tensor:
    """The mean CTC loss of `reader` reading the labels at `boxes` (see crop_labels) in `images`:
    `targets` (N, T) holds data/labels.encode of each text, padded with 0, `lengths` (N,) their
    lengths. Differentiable in `images`; freezing the reader is the caller's choice."""
    crops = crop_labels(images, boxes, reader.config.height, reader.config.width)
    log_probs = reader(crops).log_softmax(-1).transpose(0, 1)  # (T, N, C), as ctc_loss wants
    steps = torch.full((len(boxes),), log_probs.shape[0], dtype=torch.long)
    return F.ctc_loss(log_probs, targets, steps, lengths, blank=0, zero_infinity=True)


@torch.no_grad()
def read_labels(reader: LabelReader, images: Tensor, boxes: Tensor) -> list[str]:
    """What `reader` reads at each of `boxes` in `images` (greedy CTC decoding)."""
    if len(boxes) == 0:
        return []
    crops = crop_labels(images, boxes, reader.config.height, reader.config.width)
    return [decode(path) for path in reader(crops).argmax(-1)]
