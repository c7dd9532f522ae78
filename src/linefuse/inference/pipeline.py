"""LineFusePipeline: restoring charts from Python as diffusers users do.

A `diffusers.DiffusionPipeline` holding the UNet, its DDIM scheduler and (for latent models) the
VAE as registered modules, with the null prompt beside the UNet's weights and the restore
settings (formulation, shrink, deskew, tiles, default steps) in its model_index.json. It runs
inference/restorer.py's Restorer, the code evaluate, `linefuse restore` and `linefuse serve`
run, on torch: where those run the model on ONNX Runtime (eval.runtime), the two agree to the
last grey level on all but a few pixels in a hundred thousand (docs/benchmarks.md, "onnx");
where they run it on torch, to the byte. `dvc repro` saves one in
models/pipeline (evaluate: the base it scored, with what it scored it with); the curriculum's
adapter loads onto it with `load_adapter`:

>>> from PIL import Image
>>> from linefuse import LineFusePipeline
>>> pipe = LineFusePipeline.from_pretrained("models/pipeline")
>>> pipe.load_adapter("models/lora/hard")
>>> out = pipe(Image.open("chart.png"), steps=1, deskew="auto")
>>> out.images[0].save("restored.png")

`DiffusionPipeline.from_pretrained(folder)` gives a LineFusePipeline back once linefuse is
imported: this module registers the class where diffusers looks pipeline classes up by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import diffusers
import numpy as np
import torch
from diffusers import DDIMScheduler, DiffusionPipeline, ImagePipelineOutput, UNet2DConditionModel
from PIL import Image

from linefuse import paths
from linefuse.data.images import to_rgb
from linefuse.hardware import Choice
from linefuse.inference.model import (
    NULL_PROMPT_FILE,
    load_base,
    load_null_prompt,
    merge_adapter,
    save_null_prompt,
)
from linefuse.inference.restorer import Restorer
from linefuse.inference.sampler import ddim_scheduler
from linefuse.inference.settings import RestoreSettings
from linefuse.inference.torch_model import TorchModel
from linefuse.stage import UserError, atomic_dir

if TYPE_CHECKING:
    from linefuse.params.full import Params


@dataclass
class LineFusePipelineOutput(ImagePipelineOutput):
    """diffusers' image output, and with `digitize=True` each restored chart's data read back
    (linefuse.digitize: a Digitized, its series in data units, or the Unreadable saying why)."""

    digitized: list | None = None


# a diffusers pipeline runs its registered torch modules
PIPELINE_RUNTIME = Choice("torch", "LineFusePipeline: diffusers' modules")


class LineFusePipeline(DiffusionPipeline):
    """Restores blurred charts: `pipe(images)` for PIL images or uint8/uint16 arrays of any size
    and mode, converted as `linefuse restore` converts files (data/images.py), gives an
    ImagePipelineOutput whose `.images` are RGB PIL images (`output_type="np"`: uint8 arrays).

    Args:
        unet: the conditional UNet (noisy target and condition in, the clean signal out).
        scheduler: the DDIM schedule the model was trained on.
        vae: the AutoencoderKL of a latent model, or None for a pixel-space one.
        restore: RestoreSettings as a dict (model_index.json keeps it).
        steps: the DDIM steps a call takes unless told (what evaluate scored).
        null_prompt: the (1, seq, dim) prompt embedding; None reads the one saved beside the
            UNet's weights.
    """

    _optional_components = ["vae"]

    def __init__(
        self,
        unet: UNet2DConditionModel,
        scheduler: DDIMScheduler,
        vae=None,
        restore: dict | None = None,
        steps: int = 1,
        null_prompt: torch.Tensor | None = None,
    ):
        super().__init__()
        if restore is None:
            raise UserError("LineFusePipeline needs restore=RestoreSettings(...).as_dict()")
        self.register_modules(unet=unet, scheduler=scheduler, vae=vae)
        self.register_to_config(restore=restore, steps=steps)
        self.settings = RestoreSettings(**restore)
        self.null_prompt = null_prompt if null_prompt is not None else _saved_prompt(unet)
        self._restorer: Restorer | None = None

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs) -> LineFusePipeline:
        """A folder LineFusePipeline.save_pretrained wrote (models/pipeline after `dvc repro`),
        on the CPU: `.to("cuda")` moves it. Never downloads."""
        _require_pipeline_folder(Path(pretrained_model_name_or_path))
        kwargs.setdefault("local_files_only", True)
        return super().from_pretrained(pretrained_model_name_or_path, **kwargs)

    def save_pretrained(self, save_directory, **kwargs) -> None:
        """diffusers' layout (model_index.json, unet/, scheduler/), and the null prompt beside
        the UNet's weights."""
        super().save_pretrained(save_directory, **kwargs)
        save_null_prompt(self.null_prompt, Path(save_directory) / "unet")

    def load_adapter(self, adapter: str | Path) -> None:
        """Merges a peft LoRA adapter folder (models/lora/LEVEL, PeftModel.save_pretrained's)
        into the UNet, as the restorer of `linefuse restore --adapter` does; load the pipeline
        again to restore without it."""
        device = self.unet.device  # merged on the CPU, as Restorer.from_params merges
        self.register_modules(unet=merge_adapter(self.unet.to("cpu"), adapter).to(device))
        self._restorer = None

    @torch.no_grad()
    def __call__(
        self,
        images,
        steps: int | None = None,
        deskew: str | None = None,
        seed: int = 0,
        output_type: str = "pil",
        digitize: bool = False,
    ) -> LineFusePipelineOutput:
        """Restores `images` (one, or a list) of any size: straightened first (`deskew`: auto,
        always or never; the saved eval.deskew unless told), whole when they fit, else tiled,
        in `steps` DDIM steps (the saved default unless told); `digitize`: and reads each
        restored chart's series in data units (`.digitized`, as `linefuse digitize` does)."""
        if isinstance(images, Image.Image | np.ndarray):
            images = [images]
        images = [_rgb(image, position) for position, image in enumerate(images)]
        if not images:
            raise UserError("no images to restore: pass a PIL image, an array or a list of them")
        steps = self.config.steps if steps is None else steps
        if steps < 1:
            raise UserError(f"steps={steps}: must be at least 1")
        if deskew not in (None, "auto", "always", "never"):
            raise UserError(f"deskew={deskew!r}: accepts auto, always or never")
        restorer = self.restorer()
        pairs = [
            restorer.restore_pair(image, steps, seed, deskew=deskew)
            for image in self.progress_bar(images)
        ]
        restored = [image for _, image in pairs]
        digitized = None
        if digitize:
            from linefuse.digitize.chart import digitize_many

            digitized = digitize_many(restored, [straightened for straightened, _ in pairs])
        if output_type != "np":
            restored = [Image.fromarray(image) for image in restored]
        return LineFusePipelineOutput(images=restored, digitized=digitized)

    def restorer(self) -> Restorer:
        """The Restorer over this pipeline's modules, on its device (made again after .to or
        load_adapter)."""
        device = self.unet.device
        if self._restorer is None or self._restorer.model.device != device:
            self.unet.eval()
            model = TorchModel(self.unet, self.scheduler, self.null_prompt.to(device), self.vae)
            self._restorer = Restorer(model, self.settings, PIPELINE_RUNTIME)
        return self._restorer


def pipeline_from_params(params: Params, base_dir: Path = paths.BASE_DIR) -> LineFusePipeline:
    """The base in `base_dir` (save_base's layout) as a pipeline that restores as
    `Restorer.from_params(params, None)` does: params.yaml's formulation, eval.shrink,
    eval.deskew, tiles and eval.steps saved with it, so loading it needs no params.yaml."""
    vae = None
    if params.model.vae is not None:
        from linefuse.inference.model import load_vae

        vae = load_vae(params.model.vae)
    return LineFusePipeline(
        load_base(base_dir),
        ddim_scheduler(params.model),
        vae,
        RestoreSettings.from_params(params).as_dict(),
        params.eval.steps,
        load_null_prompt(base_dir),
    )


def save_default_pipeline(params: Params, folder: Path, adapter_level: str) -> None:
    """models/pipeline (evaluate): the base evaluate scored, as a pipeline, with a model card
    saying how to load it and the curriculum's last adapter `adapter_level`."""
    with atomic_dir(folder) as tmp:
        pipeline_from_params(params).save_pretrained(tmp)
        (tmp / "README.md").write_text(_card(folder, adapter_level))


def _card(folder: Path, level: str) -> str:
    adapter = paths.adapter(level)
    return f"""---
library_name: diffusers
pipeline_tag: image-to-image
tags: [linefuse, chart-restoration, lora]
---

# LineFuse pipeline: the base this run evaluated

The base UNet (`unet/`, with the null prompt it was trained with), its DDIM scheduler
(`scheduler/`) and the settings evaluate restored with (`model_index.json`: the formulation,
eval.shrink, eval.deskew, tiles, eval.steps). The curriculum's last adapter, `{adapter}`, is
a peft LoRA folder beside it; together they restore as `linefuse restore` does:

```python
from PIL import Image
from linefuse import LineFusePipeline

pipe = LineFusePipeline.from_pretrained("{folder}")
pipe.load_adapter("{adapter}")
pipe(Image.open("chart.png")).images[0].save("restored.png")
```

docs/serving.md has the arguments, the input modes and the errors.
"""


def _saved_prompt(unet: UNet2DConditionModel) -> torch.Tensor:
    """The null prompt saved beside the UNet's weights (from_pretrained loaded it from there)."""
    folder = Path(unet.config.get("_name_or_path") or ".")
    return load_null_prompt(folder if (folder / NULL_PROMPT_FILE).is_file() else folder / "unet")


def _require_pipeline_folder(folder: Path) -> None:
    """One line for a folder that is not a saved LineFusePipeline, saying what to load instead."""
    index = folder / "model_index.json"
    if index.is_file():
        name = json.loads(index.read_text()).get("_class_name")
        if name == LineFusePipeline.__name__:
            return
        raise UserError(
            f"{folder} holds a {name} pipeline, not a LineFuse model; load models/pipeline, "
            f"which `dvc repro` writes"
        )
    if (folder / NULL_PROMPT_FILE).is_file():
        raise UserError(
            f"{folder} is a LineFuse base UNet, not a pipeline (no model_index.json); load "
            f"models/pipeline, which `dvc repro` writes beside it"
        )
    raise UserError(
        f"{folder} is not a LineFuse model (no model_index.json); load models/pipeline, "
        f"which `dvc repro` writes"
    )


def _rgb(image, position: int) -> np.ndarray:
    """(H, W, 3) uint8, as `linefuse restore` decodes a file: 16-bit, grey, RGBA and palette
    images go through data/images.py's to_rgb; an array is read as Pillow reads it."""
    if isinstance(image, np.ndarray):
        if image.dtype not in (np.uint8, np.uint16) or image.ndim not in (2, 3):
            raise UserError(
                f"image {position}: a {image.dtype} array of shape {image.shape}; accepts uint8 "
                f"(H, W), (H, W, 3) or (H, W, 4), or uint16 (H, W)"
            )
        image = Image.fromarray(image)
    if not isinstance(image, Image.Image):
        raise UserError(
            f"image {position}: a {type(image).__name__}; accepts PIL images or numpy arrays"
        )
    return to_rgb(image)


# DiffusionPipeline.from_pretrained finds a model_index.json's _class_name on the diffusers module
diffusers.LineFusePipeline = LineFusePipeline
