"""`auto` device and precision: the choice per machine, its reason, and where it is recorded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from linefuse import hardware
from linefuse.hardware import choose_device, choose_precision
from linefuse.stage import UserError

AVX2_ONLY = frozenset({"sse4_2", "avx", "avx2", "fma"})
SAPPHIRE_RAPIDS = AVX2_ONLY | {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}


@pytest.fixture
def cpu(monkeypatch):
    """Pretend to be a CPU with the given flags (and no GPU, no ISA cap)."""

    def pretend(flags: frozenset[str], model: str = "Test CPU") -> None:
        monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
        monkeypatch.setattr(hardware, "cpu_model", lambda: model)
        monkeypatch.setattr(hardware, "cuda_visible", lambda: False)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)

    return pretend


@pytest.fixture
def gpu(monkeypatch):
    """Pretend to have a CUDA GPU, with or without bf16."""

    def pretend(name: str, bf16: bool, capability: tuple[int, int]) -> None:
        monkeypatch.setattr(hardware, "cuda_visible", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)

    return pretend


def test_auto_on_an_avx2_only_cpu_is_fp32_and_says_why(cpu):
    cpu(AVX2_ONLY, "AMD EPYC")
    choice = choose_precision("auto", "cpu")
    assert choice.value == "fp32"
    assert "AMD EPYC" in choice.reason and "no native bf16" in choice.reason


def test_auto_on_a_cpu_with_amx_or_avx512_bf16_is_bf16(cpu):
    cpu(SAPPHIRE_RAPIDS, "Intel Xeon 8480+")
    choice = choose_precision("auto", "cpu")
    assert choice.value == "bf16" and "amx_bf16" in choice.reason and "avx512_bf16" in choice.reason
    cpu(AVX2_ONLY | {"avx512_bf16"})
    assert choose_precision("auto", "cpu").value == "bf16"


def test_an_isa_cap_below_bf16_makes_auto_fp32(cpu, monkeypatch):
    """ONEDNN_MAX_CPU_ISA=AVX2 keeps oneDNN off AMX: bf16 would be emulated, so fp32."""
    cpu(SAPPHIRE_RAPIDS)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert choose_precision("auto", "cpu").value == "fp32"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_amx")
    assert choose_precision("auto", "cpu").value == "bf16"


def test_explicit_values_are_kept_and_slow_bf16_is_flagged(cpu):
    cpu(AVX2_ONLY)
    assert choose_precision("fp32", "cpu").value == "fp32"
    forced = choose_precision("bf16", "cpu")
    assert forced.value == "bf16" and "slower than fp32" in forced.reason
    cpu(SAPPHIRE_RAPIDS)
    assert choose_precision("bf16", "cpu").reason == "set to bf16"
    with pytest.raises(UserError, match="fp16 needs a CUDA GPU"):
        choose_precision("fp16", "cpu")


def test_auto_on_gpus_bf16_where_supported_else_fp16(gpu):
    gpu("NVIDIA H100", bf16=True, capability=(9, 0))
    assert choose_precision("auto", "cuda").value == "bf16"
    gpu("Tesla V100", bf16=False, capability=(7, 0))
    older = choose_precision("auto", "cuda")
    assert older.value == "fp16" and "7.0" in older.reason and "scaling" in older.reason


def test_device_auto_takes_a_gpu_when_there_is_one(cpu, gpu):
    cpu(AVX2_ONLY, "AMD EPYC")
    assert choose_device("auto") == hardware.Choice(
        "cpu", "auto: no CUDA GPU visible; CPU AMD EPYC"
    )
    assert choose_device("cpu").value == "cpu"
    with pytest.raises(UserError, match="--device: cuda, but no CUDA GPU is visible"):
        choose_device("cuda", "--device")
    gpu("NVIDIA H100", bf16=True, capability=(9, 0))
    assert choose_device("auto").value == "cuda" and "H100" in choose_device("auto").reason
    assert choose_device("cpu").value == "cpu"  # forcing the CPU on a GPU machine


def test_this_machine_reads_its_own_flags():
    """The real /proc/cpuinfo: a model name, and flags that include what torch reports."""
    if not hardware._cpuinfo():
        pytest.skip("no /proc/cpuinfo")
    hardware.cpu_flags.cache_clear()
    flags = hardware.cpu_flags()
    assert hardware.cpu_model() and "sse2" in flags
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        assert "avx2" in flags


def test_stages_record_the_choice(trained_project):
    """Every training stage's metrics carry the precision, the device and why, as auto chose;
    embed's carry the device."""
    device = choose_device("auto")
    expected = choose_precision("auto", device.value)
    for level in ("easy", "medium", "hard"):
        metrics = json.loads((trained_project / f"metrics/embed/{level}.json").read_text())
        assert (metrics["device"], metrics["device_reason"]) == (device.value, device.reason)
    for name in ("pretrain", "easy", "medium", "hard"):
        metrics = json.loads((trained_project / f"metrics/train/{name}.json").read_text())
        assert (metrics["precision"], metrics["precision_reason"]) == (
            expected.value,
            expected.reason,
        )
        assert (metrics["device"], metrics["device_reason"]) == (device.value, device.reason)


def test_restore_device_flag_without_a_gpu_is_one_line(trained_project, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "linefuse.cli",
            "restore",
            "data/source",
            "--device",
            "cuda",
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=trained_project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "linefuse: error: --device: cuda, but no CUDA GPU is visible; use auto or cpu"
    )
    assert not (tmp_path / "out").exists()
