"""What this machine is good at: the device and training precision that `auto` picks, and why.

Choices that change speed by an order of magnitude are made at run time from what the machine
has, never from what was fast on the machine that wrote the params: bf16 autocast is faster than
fp32 on a CPU with native bf16 (AVX-512 BF16, AMX) and far slower on an AVX2-only one, where
oneDNN emulates it (benchmarks/results/precision.json and precision-avx2.json hold the figures).
`torch.backends.cpu.get_cpu_capability()` says only AVX2/AVX512, so the CPU flags decide.
Every choice comes with a one-line reason that the stages log and write into their metrics.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from linefuse.stage import UserError

if TYPE_CHECKING:
    import torch

# /proc/cpuinfo flags of x86 CPUs that run bf16 matrix work natively (AVX-512 BF16, AMX)
NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# environment variables that cap the kernels PyTorch and oneDNN use below what the CPU has
ISA_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
# ONEDNN_MAX_CPU_ISA values that keep oneDNN from those instructions even where the CPU has them
ISAS_WITHOUT_BF16 = {
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
}
# what NVIDIA's driver shows on Linux (/dev/dxg: under WSL 2): without either no CUDA GPU is visible
NVIDIA_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/dxg")


@dataclass(frozen=True)
class Choice:
    """A value picked for this machine (or set in params) and the reason, for logs and metrics."""

    value: str
    reason: str


@cache
def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC", "Intel(R) Xeon(R) Platinum 8480+"), for reports."""
    for line in _cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags /proc/cpuinfo lists (empty where there is none, e.g. macOS)."""
    for line in _cpuinfo().splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def native_bf16_flags(flags: frozenset[str] | None = None) -> list[str]:
    """The native-bf16 flags this CPU has and oneDNN is allowed to use (ONEDNN_MAX_CPU_ISA)."""
    flags = cpu_flags() if flags is None else flags
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper() in ISAS_WITHOUT_BF16:
        return []
    return [flag for flag in NATIVE_BF16_FLAGS if flag in flags]


def cuda_visible() -> bool:
    """Whether torch sees a CUDA GPU. On Linux without NVIDIA's driver it cannot, and torch
    (seconds to import) is not asked: restoring on ONNX Runtime never imports it."""
    if sys.platform == "linux" and not any(map(os.path.exists, NVIDIA_DRIVER_FILES)):
        return False
    import torch

    return torch.cuda.is_available()


def choose_device(requested: str, key: str = "compute.device") -> Choice:
    """`compute.device` (or the `key` that set it): auto takes the CUDA GPU when one is visible,
    else the CPU."""
    if requested == "cpu":
        return Choice("cpu", "set to cpu")
    has_cuda = cuda_visible()
    if requested == "auto":
        if has_cuda:
            import torch

            return Choice("cuda", f"auto: CUDA GPU {torch.cuda.get_device_name(0)}")
        return Choice("cpu", f"auto: no CUDA GPU visible; CPU {cpu_model()}")
    if requested.startswith("cuda") and not has_cuda:
        raise UserError(f"{key}: {requested}, but no CUDA GPU is visible; use auto or cpu")
    return Choice(requested, f"set to {requested}")


def choose_precision(requested: str, device: str) -> Choice:
    """`optim.precision`: what auto picks for training on `device` ("cpu" or "cuda[:N]")."""
    import torch

    on_gpu = device.startswith("cuda")
    if requested != "auto":
        if requested == "fp16" and not on_gpu:
            raise UserError(
                "optim.precision: fp16 needs a CUDA GPU; use auto, fp32 or bf16 on the CPU"
            )
        if requested == "bf16" and not on_gpu and not native_bf16_flags():
            return Choice(
                "bf16",
                f"set to bf16, although CPU {cpu_model()} has no native bf16 "
                f"({' / '.join(NATIVE_BF16_FLAGS)}): emulated, expect it far slower than fp32",
            )
        return Choice(requested, f"set to {requested}")
    if on_gpu:
        name = torch.cuda.get_device_name(device)
        if torch.cuda.is_bf16_supported():
            return Choice("bf16", f"auto: GPU {name} supports bf16")
        major, minor = torch.cuda.get_device_capability(device)
        return Choice(
            "fp16",
            f"auto: GPU {name} (compute capability {major}.{minor}) lacks "
            f"bf16; fp16 with gradient scaling",
        )
    native = native_bf16_flags()
    if native:
        return Choice("bf16", f"auto: CPU {cpu_model()} runs bf16 natively ({', '.join(native)})")
    return Choice(
        "fp32",
        f"auto: CPU {cpu_model()} has no native bf16 (no "
        f"{' / '.join(NATIVE_BF16_FLAGS)}), where bf16 is emulated, far slower than fp32",
    )


def machine_summary() -> dict:
    """The machine behind a figure: CPU model, its bf16 flags, torch's kernels, the GPU if any."""
    import torch

    summary = {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "native_bf16_flags": native_bf16_flags(),
        "torch": torch.__version__,
        "isa_caps": {name: os.environ[name] for name in ISA_CAPS if name in os.environ},
        "platform": platform.platform(),
    }
    if torch.cuda.is_available():
        summary["gpu"] = torch.cuda.get_device_name(0)
    return summary


def host_to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`; to a GPU through pinned memory, so the host does not wait for
    the work already queued there (a plain copy from pageable memory would)."""
    import torch

    if torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def logged_device(params, name: str, requested: str | None = None) -> Choice:
    """The device for `name` (--device where given, else compute.device), logged with the
    reason."""
    choice = (
        choose_device(requested, "--device") if requested else choose_device(params.compute.device)
    )
    logging.getLogger("linefuse").info("%s: device %s (%s)", name, choice.value, choice.reason)
    return choice
