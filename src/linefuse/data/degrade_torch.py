"""The blur domains of degrade.py as batched torch ops, on whatever device the batch is on.

The base model's trainer degrades bank charts on its own device instead of waiting on numpy and
PIL in loader processes. Each domain follows degrade.py's formula with the ranges of
`DegradeParams` / `LightLevels`; a test holds the mean PSNR of both paths together per domain and
level. It is a twin in distribution, not bit for bit: the draws come from torch generators, the
JPEG is kornia's differentiable codec, and smooth fields are bicubic instead of spline zooms.

kornia is imported by the functions that use it: it is slow to import, and every stage process
imports this module through the training loop, while only the base degrades on the device.

Every draw comes from a CPU `torch.Generator`, so a CPU and a GPU run draw the same values.
`degrade_batch` draws one seed per sample and each sample draws the rest from its own generator,
so a sample's output depends on its pixels, unit and seed only, never on the batch around it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from linefuse.data.degrade import Level
from linefuse.data.jpeg import jpeg
from linefuse.params import DOMAINS, DegradeParams, LightLevels

Unit = tuple[str, Level]
SEED_BOUND = 2**62  # per-sample seeds are drawn below this (torch.randint's int64 range)
GRAIN_SIGMA = 0.7  # degrade.py's print grain smoothing, px
FADE_CELLS, SHADE_CELLS = 6, 4  # degrade.py's smooth-field grids: line fade and paper shading


def draw_units(
    count: int,
    degrade: DegradeParams,
    light: LightLevels,
    light_fraction: float,
    generator: torch.Generator,
) -> list[Unit]:
    """`count` (domain, level settings): domain and level uniform, the domain's light settings
    with probability `light_fraction` (ChartPairs' recipe)."""
    units = []
    for _ in range(count):
        domain = degrade.domains[_randint(generator, len(degrade.domains))]
        settings = degrade.level(domain, degrade.levels[_randint(generator, len(degrade.levels))])
        if torch.rand(1, generator=generator).item() < light_fraction:
            settings = getattr(light, domain)
        units.append((domain, settings))
    return units


def degrade_batch(sharp: Tensor, units: Sequence[Unit], generator: torch.Generator) -> Tensor:
    """Degrade a (B, 3, H, W) float batch in [0, 1]; same shape and device, on the k/255 grid."""
    seeds = torch.randint(SEED_BOUND, (len(units),), generator=generator).tolist()
    return degrade_seeded(sharp, units, seeds)


def degrade_seeded(sharp: Tensor, units: Sequence[Unit], seeds: Sequence[int]) -> Tensor:
    """`degrade_batch` with the per-sample seeds given: sample i depends on (sharp[i], units[i],
    seeds[i]) only. The samples of one domain are degraded together."""
    if sharp.ndim != 4 or sharp.shape[1] != 3 or not len(units) == len(sharp) == len(seeds):
        raise ValueError(f"expected (B, 3, H, W) with B units and seeds, got {tuple(sharp.shape)}")
    image = sharp.float()
    out = torch.empty_like(image)
    for domain in DOMAINS:
        members = [i for i, (name, _) in enumerate(units) if name == domain]
        if members:
            levels = [units[i][1] for i in members]
            generators = [torch.Generator().manual_seed(int(seeds[i])) for i in members]
            out[members] = _DOMAINS[domain](image[members], levels, generators)
    return quantise(out).to(sharp.dtype)


def quantise(image: Tensor) -> Tensor:
    """Onto the k/255 grid, as degrade.py's uint8 output is (round half to even, as np.rint)."""
    return torch.round(image.clamp(0.0, 1.0) * 255.0) / 255.0


# --- draws: one per sample, each from the sample's own generator --------------------------------


def _randint(generator: torch.Generator, high: int) -> int:
    return int(torch.randint(high, (1,), generator=generator).item())


def _uniform(generators: list[torch.Generator], bounds: Callable, device) -> Tensor:
    """One uniform draw in bounds(i) = (low, high) per sample, as a (B,) float tensor."""
    values = []
    for i, generator in enumerate(generators):
        low, high = bounds(i)
        values.append(low + (high - low) * torch.rand(1, generator=generator, dtype=torch.float64))
    return torch.cat(values).float().to(device)


def _integers(generators: list[torch.Generator], bounds: Callable) -> list[int]:
    """One integer in [low, high] (both included, as rng.integers(..., endpoint=True))."""
    return [
        int(torch.randint(bounds(i)[0], bounds(i)[1] + 1, (1,), generator=g).item())
        for i, g in enumerate(generators)
    ]


def _smooth_field(generators: list[torch.Generator], shape, cells: int, device) -> Tensor:
    """(B, 1, H, W) low-frequency fields in [-1, 1]: a cells x cells uniform grid, upsampled
    bicubically (degrade.py zooms a cubic spline; both interpolate the same grid)."""
    coarse = torch.stack([torch.rand(1, cells, cells, generator=g) for g in generators])
    field = F.interpolate((2.0 * coarse - 1.0).to(device), size=shape, mode="bicubic")
    return field.clamp(-1.0, 1.0)


# --- kernels ----------------------------------------------------------------------------------


def _gaussian_taps(sigmas: Tensor) -> Tensor:
    """(B, 2R+1) 1-D Gaussian taps, truncated at int(4 sigma + 0.5) like gaussian_filter's,
    zero-padded to the batch's widest; sigma 0 gives the identity."""
    radii = (4.0 * sigmas + 0.5).floor()
    radius = int(radii.max().item())
    x = torch.arange(-radius, radius + 1, device=sigmas.device, dtype=torch.float32)
    taps = torch.exp(-0.5 * (x / sigmas.clamp_min(1e-6)[:, None]) ** 2)
    taps = taps * (x.abs() <= radii[:, None]) + (x == 0) * (sigmas[:, None] <= 0)
    return taps / taps.sum(dim=1, keepdim=True)


def _half_sample_pad(image: Tensor, pad_y: int, pad_x: int) -> Tensor:
    """Pad by mirroring about the edge between pixels (d c b a | a b c d), scipy.ndimage's
    'reflect'. torch's and kornia's 'reflect' mirror about the edge pixel instead, which differs
    where ink touches a crop's border."""

    def mirror(size: int, pad: int) -> Tensor:
        index = torch.arange(-pad, size + pad, device=image.device).remainder(2 * size)
        return torch.where(index < size, index, 2 * size - 1 - index)

    height, width = image.shape[-2:]
    return image[..., mirror(height, pad_y), :][..., mirror(width, pad_x)]


def _gaussian_blur(image: Tensor, sigmas: Tensor) -> Tensor:
    """Per-sample isotropic Gaussian blur; kornia's separable filter takes (B, k) taps."""
    import kornia  # here, not at the top: see the module docstring

    taps = _gaussian_taps(sigmas)
    radius = taps.shape[1] // 2
    padded = _half_sample_pad(image, radius, radius)
    return kornia.filters.filter2d_separable(padded, taps, taps, padding="valid")


def _motion_kernels(lengths: list[int], angles: Tensor) -> Tensor:
    """(B, 2R+1, 2R+1) line PSFs as degrade._motion_kernel draws them (16 samples a px of the
    segment, each spread bilinearly), centred in the batch's largest size.

    kornia's motion kernels are drawn otherwise (and one size per batch), so the PSF is ours.
    """
    device = angles.device
    radius = math.ceil(max(lengths) / 2)
    side = 2 * radius + 2  # the extra row and column only ever get 0, as in degrade.py
    length = torch.tensor(lengths, device=device, dtype=torch.float32)[:, None]
    n = torch.arange(16 * max(lengths), device=device, dtype=torch.float32)
    used = n < 16 * length  # each sample's own 16 * length points along its segment
    t = (n + 0.5) / (16 * length) * length - length / 2
    a = torch.deg2rad(angles)[:, None]
    xs, ys = radius + t * torch.cos(a), radius - t * torch.sin(a)  # image rows grow downwards
    x0, y0 = xs.floor(), ys.floor()
    fx, fy = xs - x0, ys - y0
    kernel = torch.zeros(len(lengths), side * side, device=device)
    for dy, wy in ((0, 1 - fy), (1, fy)):
        for dx, wx in ((0, 1 - fx), (1, fx)):
            # points past a sample's own segment carry weight 0; clamp keeps them in the kernel
            index = ((y0 + dy) * side + (x0 + dx)).long().clamp(0, side * side - 1)
            kernel.scatter_add_(1, index, wy * wx * used)
    kernel = kernel.view(-1, side, side)[:, :-1, :-1]
    return kernel / kernel.sum(dim=(1, 2), keepdim=True)


# --- domains: (B, 3, H, W) float in [0, 1], the samples' level settings and generators ---------


def _gaussian(image: Tensor, levels: list, generators: list) -> Tensor:
    """Defocus: an isotropic Gaussian PSF."""
    sigmas = _uniform(generators, lambda i: levels[i].sigma, image.device)
    return _gaussian_blur(image, sigmas)


def _motion(image: Tensor, levels: list, generators: list) -> Tensor:
    """Camera shake: a straight line PSF, convolved (not correlated) as ndimage.convolve does."""
    import kornia  # here, not at the top: see the module docstring

    lengths = _integers(generators, lambda i: levels[i].length)
    angles = _uniform(generators, lambda i: levels[i].angle, image.device)
    kernels = _motion_kernels(lengths, angles)
    radius = kernels.shape[-1] // 2
    padded = _half_sample_pad(image, radius, radius)
    return kornia.filters.filter2d(padded, kernels, padding="valid", behaviour="conv")


def _scan(image: Tensor, levels: list, generators: list) -> Tensor:
    """Print and scan, in degrade._scan's order: line fade, rotation and shear about the centre,
    resampling blur, contrast toward the paper tone, paper shading, then print grain."""
    device, shape = image.device, image.shape[-2:]
    rotation = _uniform(
        generators, lambda i: (-levels[i].rotation_deg, levels[i].rotation_deg), device
    )
    shear = _uniform(generators, lambda i: (-levels[i].shear, levels[i].shear), device)
    paper = _uniform(generators, lambda i: (0.9, 1.0), device)[:, None, None, None]
    setting = {
        key: torch.tensor([getattr(lv, key) for lv in levels], device=device)[:, None, None, None]
        for key in ("line_fade", "contrast", "background", "noise")
    }
    fade = setting["line_fade"] * _smooth_field(generators, shape, FADE_CELLS, device).clamp(0, 1)
    image = image + (1.0 - image) * fade  # lightens dark ink; white stays white
    image = _rotate_shear(image, rotation, shear)
    blur = torch.tensor([lv.blur for lv in levels], device=device, dtype=torch.float32)
    image = _gaussian_blur(image, blur)
    image = setting["contrast"] * image + (1.0 - setting["contrast"]) * paper
    shading = _smooth_field(generators, shape, SHADE_CELLS, device)
    image = image * (1.0 + setting["background"] * shading)
    noise = torch.stack([torch.randn(3, *shape, generator=g) for g in generators]).to(device)
    grain = _gaussian_blur(noise, torch.full((len(levels),), GRAIN_SIGMA, device=device))
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


def _compression(image: Tensor, levels: list, generators: list) -> Tensor:
    """JPEG artefacts at a per-image quality, from the k/255 input PIL would be given.

    linefuse.data.jpeg, not kornia's differentiable codec: kornia rounds softly and so leaves
    less error than PIL's JPEG at the same quality.
    """
    quality = _integers(generators, lambda i: levels[i].quality)
    return jpeg(quantise(image), torch.tensor(quality, device=image.device))


def _lowres(image: Tensor, levels: list, generators: list) -> Tensor:
    """Bicubic down by `factor`, then back up. torch's antialiased bicubic is PIL's (a = -0.5,
    widened support when shrinking); the small image is quantised as PIL's uint8 one is. A loop
    over samples: each has its own small size."""
    factors = _uniform(generators, lambda i: levels[i].factor, "cpu").tolist()
    height, width = image.shape[-2:]
    out = []
    for sample, factor in zip(image, factors, strict=True):
        small = (max(1, round(height / factor)), max(1, round(width / factor)))
        down = F.interpolate(sample[None], size=small, mode="bicubic", antialias=True)
        up = F.interpolate(quantise(down), size=(height, width), mode="bicubic", antialias=True)
        out.append(up)
    return torch.cat(out)


# one function per name in params.DOMAINS, named after it: the list of domains lives there only
_DOMAINS = {domain: globals()[f"_{domain}"] for domain in DOMAINS}
