"""The blur domains of degrade.py as batched torch ops, on whatever device the batch is on.

The base model's trainer degrades bank charts on its own device instead of waiting on numpy and
PIL in loader processes. Each domain follows degrade.py's formula with the ranges of
`DegradeParams` / `LightLevels`; a test holds the mean PSNR of both paths together per domain and
level. It is a twin in distribution, not bit for bit: the draws come from torch generators, the
JPEG is LineFuse's own hard-rounding codec (linefuse.data.jpeg), and smooth fields are bicubic
instead of spline zooms.

A batch is degraded in two halves, so the device never waits on the host nor the host on the
device:
- `draw_plan` draws, on the host from a CPU generator, what each sample gets: its domain (the
  samples of one domain lie side by side), its level or the light setting, and its scalars
  (sigma, length, angle, rotation, quality, factor ...) as whole-batch vector ops. Sizes that
  shape a kernel (the widest blur, the longest motion, each low-resolution size) are known
  there, so no step reads a value back from the device.
- `degrade_batch` applies the plan; the per-pixel draws (grain, smooth fields) come from a
  generator on the batch's device. Same plan and generator seed, same output.

kornia is imported by the functions that use it: it is slow to import, and every stage process
imports this module through the training loop, while only the base degrades on the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from linefuse.data.jpeg import jpeg
from linefuse.hardware import host_to_device
from linefuse.params import DOMAINS
from linefuse.params.base import LightLevels
from linefuse.params.degrade import DegradeParams

GRAIN_SIGMA = 0.7  # degrade.py's print grain smoothing, px
FADE_CELLS, SHADE_CELLS = 6, 4  # degrade.py's smooth-field grids: line fade and paper shading
PAPER_TONE = (0.9, 1.0)  # degrade.py's scan paper brightness range


@dataclass
class DomainPlan:
    """One domain's run of samples, batch[start:stop]: `levels` indexes each sample's setting
    (degrade.levels in order, then the light one), `values` its drawn scalars (host tensors)."""

    domain: str
    start: int
    stop: int
    levels: Tensor
    values: dict[str, Tensor] = field(default_factory=dict)


@dataclass
class Plan:
    """What each sample of a batch gets, drawn on the host (`draw_plan`)."""

    parts: list[DomainPlan]

    def labels(self, degrade: DegradeParams) -> list[tuple[str, str]]:
        """(domain, level name or "light") per sample, in batch order."""
        names = [*degrade.levels, "light"]
        return [(p.domain, names[int(k)]) for p in self.parts for k in p.levels]


def _settings(degrade: DegradeParams, light: LightLevels, domain: str) -> list:
    """The domain's settings, indexable by a plan's level index."""
    return [degrade.level(domain, level) for level in degrade.levels] + [getattr(light, domain)]


def _bounds(settings: list, key: str, levels: Tensor) -> tuple[Tensor, Tensor]:
    """Per-sample (low, high) of `key`: a range's ends, or a fixed value twice."""
    pairs = []
    for setting in settings:
        value = getattr(setting, key)
        pairs.append(tuple(value) if isinstance(value, (tuple, list)) else (value, value))
    table = torch.tensor(pairs, dtype=torch.float64)[levels]
    return table[:, 0], table[:, 1]


def _uniform(settings: list, key: str, levels: Tensor, generator: torch.Generator) -> Tensor:
    low, high = _bounds(settings, key, levels)
    return low + (high - low) * torch.rand(len(levels), generator=generator, dtype=torch.float64)


def _integers(settings: list, key: str, levels: Tensor, generator: torch.Generator) -> Tensor:
    """An integer in [low, high], both included (as rng.integers(..., endpoint=True))."""
    low, high = _bounds(settings, key, levels)
    u = torch.rand(len(levels), generator=generator, dtype=torch.float64)
    return (low + torch.floor(u * (high - low + 1))).clamp(max=high).long()


def _symmetric(settings: list, key: str, levels: Tensor, generator: torch.Generator) -> Tensor:
    """Uniform in (-v, v) for a fixed v per setting (the scan's rotation and shear)."""
    magnitude = _bounds(settings, key, levels)[0]
    return magnitude * (2 * torch.rand(len(levels), generator=generator, dtype=torch.float64) - 1)


_DRAWS = {
    "gaussian": {"sigma": _uniform},
    "motion": {"length": _integers, "angle": _uniform},
    "scan": {
        "rotation_deg": _symmetric,
        "shear": _symmetric,
        **{key: _uniform for key in ("line_fade", "contrast", "background", "noise", "blur")},
    },
    "compression": {"quality": _integers},
    "lowres": {"factor": _uniform},
}


def draw_plan(
    count: int,
    degrade: DegradeParams,
    light: LightLevels,
    light_fraction: float,
    generator: torch.Generator,
) -> Plan:
    """`count` samples' degradations: domain and level uniform, the domain's light setting with
    probability `light_fraction` (ChartPairs' recipe); `generator` is a CPU one."""
    domains = degrade.domains
    picks = torch.randint(len(domains), (count,), generator=generator)
    counts = torch.bincount(picks, minlength=len(domains)).tolist()
    parts, start = [], 0
    for domain, size in zip(domains, counts, strict=True):
        levels = torch.randint(len(degrade.levels), (size,), generator=generator)
        is_light = torch.rand(size, generator=generator) < light_fraction
        levels = torch.where(is_light, len(degrade.levels), levels)
        settings = _settings(degrade, light, domain)
        values = {
            key: draw(settings, key, levels, generator) for key, draw in _DRAWS[domain].items()
        }
        if domain == "scan":
            low, high = PAPER_TONE
            values["paper"] = low + (high - low) * torch.rand(size, generator=generator)
        if domain == "lowres":  # by factor, so the samples of one small size lie side by side
            order = torch.argsort(values["factor"])
            levels, values = levels[order], {key: v[order] for key, v in values.items()}
        parts.append(DomainPlan(domain, start, start + size, levels, values))
        start += size
    return Plan(parts)


def single_plan(count: int, domain: str, setting, generator: torch.Generator) -> Plan:
    """A plan of `count` samples of one domain at one setting (tests, scores)."""
    levels = torch.zeros(count, dtype=torch.long)
    values = {key: draw([setting], key, levels, generator) for key, draw in _DRAWS[domain].items()}
    if domain == "scan":
        values["paper"] = PAPER_TONE[0] + 0.1 * torch.rand(count, generator=generator)
    return Plan([DomainPlan(domain, 0, count, levels, values)])


def degrade_batch(sharp: Tensor, plan: Plan, generator: torch.Generator) -> Tensor:
    """Degrade a (B, 3, H, W) float batch in [0, 1] as `plan` says; per-pixel draws from
    `generator`, which lives on the batch's device. Same shape and device, on the k/255 grid."""
    if sharp.ndim != 4 or sharp.shape[1] != 3 or plan.parts[-1].stop != len(sharp):
        raise ValueError(f"expected (B, 3, H, W) with B planned samples, got {tuple(sharp.shape)}")
    image = sharp.float()
    out = torch.empty_like(image)
    for part in plan.parts:
        if part.stop > part.start:
            members = image[part.start : part.stop]
            out[part.start : part.stop] = _DOMAINS[part.domain](members, part.values, generator)
    return quantise(out).to(sharp.dtype)


def quantise(image: Tensor) -> Tensor:
    """Onto the k/255 grid, as degrade.py's uint8 output is (round half to even, as np.rint)."""
    return torch.round(image.clamp(0.0, 1.0) * 255.0) / 255.0


def _on(values: Tensor, image: Tensor) -> Tensor:
    """A plan's host values as float32 on the image's device, without waiting for the device."""
    return host_to_device(values.float(), image.device)


def _smooth_field(count: int, shape, cells: int, generator: torch.Generator, device) -> Tensor:
    """(B, 1, H, W) low-frequency fields in [-1, 1]: a cells x cells uniform grid, upsampled
    bicubically (degrade.py zooms a cubic spline; both interpolate the same grid)."""
    coarse = torch.rand(count, 1, cells, cells, generator=generator, device=device)
    return F.interpolate(2.0 * coarse - 1.0, size=shape, mode="bicubic").clamp(-1.0, 1.0)


# --- kernels ----------------------------------------------------------------------------------


def _gaussian_taps(sigmas: Tensor, radius: int) -> Tensor:
    """(B, 2R+1) 1-D Gaussian taps, truncated at int(4 sigma + 0.5) like gaussian_filter's,
    zero-padded to `radius` (the batch's widest, known on the host); sigma 0 is the identity."""
    radii = (4.0 * sigmas + 0.5).floor()
    x = torch.arange(-radius, radius + 1, device=sigmas.device, dtype=torch.float32)
    taps = torch.exp(-0.5 * (x / sigmas.clamp_min(1e-6)[:, None]) ** 2)
    taps = taps * (x.abs() <= radii[:, None]) + (x == 0) * (sigmas[:, None] <= 0)
    return taps / taps.sum(dim=1, keepdim=True)


def _gaussian_radius(sigmas: Tensor) -> int:
    """The widest truncation radius of host `sigmas`."""
    return int(math.floor(4.0 * float(sigmas.max()) + 0.5)) if len(sigmas) else 0


def _half_sample_pad(image: Tensor, pad_y: int, pad_x: int) -> Tensor:
    """Pad by mirroring about the edge between pixels (d c b a | a b c d), scipy.ndimage's
    'reflect'. torch's and kornia's 'reflect' mirror about the edge pixel instead, which differs
    where ink touches a crop's border."""

    def mirror(size: int, pad: int) -> Tensor:
        index = torch.arange(-pad, size + pad, device=image.device).remainder(2 * size)
        return torch.where(index < size, index, 2 * size - 1 - index)

    height, width = image.shape[-2:]
    return image[..., mirror(height, pad_y), :][..., mirror(width, pad_x)]


def _gaussian_blur(image: Tensor, sigmas: Tensor, radius: int) -> Tensor:
    """Per-sample isotropic Gaussian blur; kornia's separable filter takes (B, k) taps."""
    import kornia  # here, not at the top: see the module docstring

    taps = _gaussian_taps(sigmas, radius)
    padded = _half_sample_pad(image, radius, radius)
    return kornia.filters.filter2d_separable(padded, taps, taps, padding="valid")


def _motion_kernels(lengths: Tensor, longest: int, angles: Tensor) -> Tensor:
    """(B, 2R+1, 2R+1) line PSFs as degrade._motion_kernel draws them (16 samples a px of the
    segment, each spread bilinearly), centred in the size of the `longest` (a host int).

    kornia's motion kernels are drawn otherwise (and one size per batch), so the PSF is ours.
    """
    device = angles.device
    radius = math.ceil(longest / 2)
    side = 2 * radius + 2  # the extra row and column only ever get 0, as in degrade.py
    length = lengths.float()[:, None]
    n = torch.arange(16 * longest, device=device, dtype=torch.float32)
    used = n < 16 * length  # each sample's own 16 * length points along its segment
    t = (n + 0.5) / (16 * length) * length - length / 2
    a = torch.deg2rad(angles)[:, None]
    xs, ys = radius + t * torch.cos(a), radius - t * torch.sin(a)  # image rows grow downwards
    x0, y0 = xs.floor(), ys.floor()
    fx, fy = xs - x0, ys - y0
    kernel = torch.zeros(len(angles), side * side, device=device)
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            # points past a sample's own segment carry weight 0; clamp keeps them in the kernel
            index = ((y0 + dy) * side + (x0 + dx)).long().clamp(0, side * side - 1)
            kernel.scatter_add_(1, index, wy * wx * used)
    kernel = kernel.view(-1, side, side)[:, :-1, :-1]
    return kernel / kernel.sum(dim=(1, 2), keepdim=True)


# --- domains: (B, 3, H, W) float in [0, 1], the plan's values, the device generator -------------


def _gaussian(image: Tensor, values: dict, generator: torch.Generator) -> Tensor:
    """Defocus: an isotropic Gaussian PSF."""
    sigma = values["sigma"]
    return _gaussian_blur(image, _on(sigma, image), _gaussian_radius(sigma))


def _motion(image: Tensor, values: dict, generator: torch.Generator) -> Tensor:
    """Camera shake: a straight line PSF, convolved (not correlated) as ndimage.convolve does."""
    import kornia  # here, not at the top: see the module docstring

    lengths = values["length"]
    kernels = _motion_kernels(_on(lengths, image), int(lengths.max()), _on(values["angle"], image))
    radius = kernels.shape[-1] // 2
    padded = _half_sample_pad(image, radius, radius)
    return kornia.filters.filter2d(padded, kernels, padding="valid", behaviour="conv")


def _scan(image: Tensor, values: dict, generator: torch.Generator) -> Tensor:
    """Print and scan, in degrade._scan's order: line fade, rotation and shear about the centre,
    resampling blur, contrast toward the paper tone, paper shading, then print grain."""
    device, shape, count = image.device, image.shape[-2:], len(image)
    setting = {
        key: _on(values[key], image)[:, None, None, None]
        for key in ("line_fade", "contrast", "background", "noise", "paper")
    }
    fade = _smooth_field(count, shape, FADE_CELLS, generator, device).clamp(0, 1)
    image = image + (1.0 - image) * setting["line_fade"] * fade  # lightens ink; white stays
    image = _rotate_shear(image, _on(values["rotation_deg"], image), _on(values["shear"], image))
    image = _gaussian_blur(image, _on(values["blur"], image), _gaussian_radius(values["blur"]))
    image = setting["contrast"] * image + (1.0 - setting["contrast"]) * setting["paper"]
    shading = _smooth_field(count, shape, SHADE_CELLS, generator, device)
    image = image * (1.0 + setting["background"] * shading)
    noise = torch.randn(count, 3, *shape, generator=generator, device=device)
    grain_sigma = torch.full((count,), GRAIN_SIGMA, device=device)
    grain = _gaussian_blur(noise, grain_sigma, _gaussian_radius(torch.tensor([GRAIN_SIGMA])))
    std = grain.flatten(1).std(dim=1, correction=0).clamp_min(1e-12)[:, None, None, None]
    return image + grain / std * (0.1 * setting["noise"])


def _rotate_shear(image: Tensor, rotation_deg: Tensor, shear: Tensor) -> Tensor:
    """degrade._scan's ndimage.affine_transform (row/col matrix R(a) @ [[1, 0], [shear, 1]]
    about the centre, bilinear, edges held) as affine_grid + grid_sample."""
    height, width = image.shape[-2:]
    a = torch.deg2rad(rotation_deg)
    cos, sin = torch.cos(a), torch.sin(a)
    # matrix (row, col) -> (row, col): [[cos - sin*shear, -sin], [sin + cos*shear, cos]]
    m00, m01, m10, m11 = cos - sin * shear, -sin, sin + cos * shear, cos
    sy, sx = (height - 1) / 2, (width - 1) / 2  # align_corners=True: centre to edge pixel, px
    zero = torch.zeros_like(a)
    theta = torch.stack(
        [
            torch.stack([m11, m10 * sy / max(sx, 1e-6), zero], dim=1),
            torch.stack([m01 * sx / max(sy, 1e-6), m00, zero], dim=1),
        ],
        dim=1,
    )  # grid_sample's (x, y) order: x_in = m11 x + m10 y, y_in = m01 x + m00 y, scaled
    grid = F.affine_grid(theta, list(image.shape), align_corners=True)
    return F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=True)


def _compression(image: Tensor, values: dict, generator: torch.Generator) -> Tensor:
    """JPEG artefacts at a per-image quality, from the k/255 input PIL would be given.

    linefuse.data.jpeg, not kornia's differentiable codec: kornia rounds softly and so leaves
    less error than PIL's JPEG at the same quality.
    """
    return jpeg(quantise(image), _on(values["quality"], image))


def _lowres(image: Tensor, values: dict, generator: torch.Generator) -> Tensor:
    """Bicubic down by `factor`, then back up. torch's antialiased bicubic is PIL's (a = -0.5,
    widened support when shrinking); the small image is quantised as PIL's uint8 one is. The
    samples that shrink to one size (known on the host) are resized together."""
    height, width = image.shape[-2:]
    sizes = [
        (max(1, round(height / f)), max(1, round(width / f))) for f in values["factor"].tolist()
    ]
    out, start = torch.empty_like(image), 0
    while start < len(sizes):  # the plan sorts by factor: one size is one run of samples
        stop = start + 1
        while stop < len(sizes) and sizes[stop] == sizes[start]:
            stop += 1
        down = F.interpolate(image[start:stop], sizes[start], mode="bicubic", antialias=True)
        out[start:stop] = F.interpolate(
            quantise(down), size=(height, width), mode="bicubic", antialias=True
        )
        start = stop
    return out


# one function per name in params.DOMAINS, named after it: the list of domains lives there only
_DOMAINS = {domain: globals()[f"_{domain}"] for domain in DOMAINS}
