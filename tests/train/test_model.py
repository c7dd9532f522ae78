"""The conditional UNet: tiny builds, widened pretrained folders, LoRA and hybrid adapters."""

from __future__ import annotations

import sys
from pathlib import Path

import peft
import pytest
import torch
from diffusers import UNet2DConditionModel
from safetensors import safe_open
from torch import nn

from linefuse.inference.model import load_base, load_null_prompt, predict
from linefuse.params.full import load_params
from linefuse.params.training import LoraParams
from linefuse.stage import UserError
from linefuse.train.model import (
    adapter_start,
    add_lora,
    build_unet,
    count_parameters,
    load_adapter,
    quantize_frozen,
    save_base,
)

ROOT = Path(__file__).resolve().parents[2]
BATCH, SIZE, SEQ = 2, 32, 8


@pytest.fixture(scope="module")
def lora() -> LoraParams:
    return load_params(ROOT / "params.yaml").train.lora


def inputs(channels: int = 3, cross_dim: int = 32, seed: int = 1):
    """(noisy, condition, timesteps, prompt_embeds) for a batch of 2 at 32x32."""
    g = torch.Generator().manual_seed(seed)
    noisy = torch.randn(BATCH, channels, SIZE, SIZE, generator=g)
    condition = torch.randn(BATCH, channels, SIZE, SIZE, generator=g)
    prompt = torch.randn(BATCH, SEQ, cross_dim, generator=g)
    return noisy, condition, torch.tensor([10, 900]), prompt


def randomise_conv_out(unet: nn.Module) -> nn.Module:
    """A base whose output is not identically zero, the same one every call."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in unet.conv_out.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    return unet


def trained_base() -> UNet2DConditionModel:
    return randomise_conv_out(build_unet("tiny", 3))


def lora_size(unet: nn.Module, lora: LoraParams) -> int:
    """What rank-r LoRA adds on every target: A (in -> r, the layer's kernel) + B (r -> out)."""
    total = 0
    for name, module in unet.named_modules():
        if lora.blocks and not any(name.startswith(block + ".") for block in lora.blocks):
            continue
        if any(name.endswith("." + target) for target in lora.target_modules):
            if isinstance(module, nn.Conv2d):
                kh, kw = module.kernel_size
                total += lora.rank * (module.in_channels * kh * kw + module.out_channels)
            else:
                total += lora.rank * (module.in_features + module.out_features)
    return total


# --- tiny build -------------------------------------------------------------------------------


@pytest.mark.parametrize("channels", [3, 4])
def test_tiny_build_is_conditional_and_predicts_zero_at_init(channels):
    unet = build_unet("tiny", channels)
    assert (unet.config.in_channels, unet.config.out_channels) == (2 * channels, channels)
    assert unet.conv_in.in_channels == 2 * channels
    with torch.no_grad():
        out = predict(unet, *inputs(channels))
    assert out.shape == (BATCH, channels, SIZE, SIZE)
    assert torch.count_nonzero(out) == 0


def test_tiny_build_is_deterministic_and_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first, second = build_unet("tiny", 3).state_dict(), build_unet("tiny", 3).state_dict()
    assert torch.equal(torch.get_rng_state(), state)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert first["conv_in.weight"].std() > 0  # seeded, not zeroed


# --- LoRA -------------------------------------------------------------------------------------


def test_lora_trains_a_small_fraction_of_the_unet(lora):
    base_total = count_parameters(build_unet("tiny", 3))[1]
    model = add_lora(build_unet("tiny", 3), lora)
    trainable, total = count_parameters(model)
    expected = lora_size(build_unet("tiny", 3), lora)
    assert trainable == expected > 0
    assert total == base_total + trainable
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)
    # LoRA trains at most a fifth of the base's parameters (params.yaml's rank 16 on every block)
    assert trainable / base_total <= 0.20


def test_lora_blocks_restrict_the_targets(lora):
    everywhere = count_parameters(
        add_lora(build_unet("tiny", 3), lora.model_copy(update={"blocks": []}))
    )[0]
    model = add_lora(build_unet("tiny", 3), lora.model_copy(update={"blocks": ["mid_block"]}))
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert names
    assert all(n.startswith("base_model.model.mid_block.") and "lora_" in n for n in names)
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in names} == {
        "to_q",
        "to_k",
        "to_v",
        "0",
        "conv1",
    }  # "0" is to_out.0
    assert 0 < count_parameters(model)[0] < everywhere


def test_lora_that_matches_nothing_is_one_clear_error(lora):
    nothing = lora.model_copy(update={"blocks": ["up_blocks.2"], "target_modules": ["to_q"]})
    with pytest.raises(ValueError, match=r"^train\.lora\.target_modules / train\.lora\.blocks: "):
        add_lora(build_unet("tiny", 3), nothing)
    with pytest.raises(ValueError, match=r"^train\.unfreeze\.blocks: .*'up_blocks\.9'"):
        add_lora(build_unet("tiny", 3), lora, unfreeze_blocks=["up_blocks.9"])


@pytest.mark.parametrize("unfreeze", [[], ["up_blocks.2"]], ids=["lora", "hybrid"])
def test_adapter_starts_as_identity_trains_and_round_trips(lora, unfreeze, tmp_path):
    batch = inputs()
    with torch.no_grad():
        reference = predict(trained_base(), *batch)
    assert reference.abs().mean() > 0
    model = add_lora(trained_base(), lora, unfreeze_blocks=unfreeze)
    with torch.no_grad():
        assert torch.equal(predict(model, *batch), reference)

    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    predict(model, *batch).square().mean().backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        trained = predict(model, *batch)
    assert not torch.allclose(trained, reference)

    model.save_pretrained(tmp_path)
    assert (tmp_path / "adapter_config.json").is_file()
    assert (tmp_path / "adapter_model.safetensors").is_file()
    for loaded in (
        load_adapter(trained_base(), tmp_path, trainable=False),
        peft.PeftModel.from_pretrained(trained_base(), tmp_path),
    ):
        assert count_parameters(loaded)[0] == 0
        with torch.no_grad():
            assert torch.equal(predict(loaded, *batch), trained)
    resumed = load_adapter(trained_base(), tmp_path, trainable=True)
    assert count_parameters(resumed)[0] == count_parameters(model)[0]


def test_hybrid_unfreeze_trains_and_saves_the_whole_block(lora, tmp_path):
    block = build_unet("tiny", 3).up_blocks[2]
    block_size = sum(p.numel() for p in block.parameters())
    lora_only = count_parameters(add_lora(build_unet("tiny", 3), lora))[0]
    model = add_lora(build_unet("tiny", 3), lora, unfreeze_blocks=["up_blocks.2"])

    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    copy = "base_model.model.up_blocks.2.modules_to_save.default."
    assert {copy + name for name, _ in block.named_parameters()} <= trainable
    assert not any("up_blocks.2" in n and "lora_" in n for n in trainable)  # peft skips LoRA there
    lora_in_block = lora_size(block, lora.model_copy(update={"blocks": []}))  # names relative to it
    assert count_parameters(model)[0] == lora_only - lora_in_block + block_size

    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "adapter_model.safetensors", "pt") as f:
        keys = set(f.keys())
    saved_block = {k for k in keys if k.startswith("base_model.model.up_blocks.2.")}
    assert saved_block == {"base_model.model.up_blocks.2." + k for k in block.state_dict()}
    assert sum(1 for k in keys if "lora_" in k) == sum(1 for n in trainable if "lora_" in n)


def test_the_hybrid_starts_where_the_lora_level_ended(lora, tmp_path):
    """The first hybrid level loads a LoRA-only adapter: the block it trains fully starts from the
    base with that adapter's LoRA merged in, so the model it starts from predicts the same."""
    save_base(trained_base(), tmp_path / "base", torch.zeros(1, 1, 32))
    batch = inputs()
    model = add_lora(load_base(tmp_path / "base"), lora)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    predict(model, *batch).square().mean().backward()
    optimizer.step()
    model.save_pretrained(tmp_path / "lora")
    with torch.no_grad():
        ended = predict(model.eval(), *batch)

    hybrid = add_lora(load_base(tmp_path / "base"), lora, unfreeze_blocks=["up_blocks.2"])
    start = adapter_start(hybrid, tmp_path / "base", tmp_path / "lora")
    assert any(name.startswith("base_model.model.up_blocks.2.resnets") for name in start)
    peft.set_peft_model_state_dict(hybrid, start)
    with torch.no_grad():
        started = predict(hybrid.eval(), *batch)
        base_only = predict(load_base(tmp_path / "base"), *batch)
    assert not torch.allclose(ended, base_only)
    assert torch.allclose(started, ended, atol=1e-5), (started - ended).abs().max()


# --- pretrained folders -----------------------------------------------------------------------


def small_pretrained(in_channels: int, out_channels: int = 4) -> UNet2DConditionModel:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        unet = UNet2DConditionModel(
            sample_size=SIZE,
            in_channels=in_channels,
            out_channels=out_channels,
            block_out_channels=(8, 16),
            layers_per_block=1,
            norm_num_groups=4,
            down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
            up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
            cross_attention_dim=16,
            attention_head_dim=4,
        )
    return randomise_conv_out(unet)


def test_pretrained_folder_is_widened_for_the_condition(tmp_path):
    original = small_pretrained(4)
    original.save_pretrained(tmp_path)
    unet = build_unet(str(tmp_path), channels=4)
    assert (unet.config.in_channels, unet.conv_in.in_channels) == (8, 8)
    assert unet.config.out_channels == 4
    noisy, _, timesteps, prompt = inputs(4, cross_dim=16)
    with torch.no_grad():
        expected = original(noisy, timesteps, encoder_hidden_states=prompt).sample
        assert expected.abs().mean() > 0
        for seed in (2, 3):
            condition = inputs(4, cross_dim=16, seed=seed)[1] * 10
            torch.testing.assert_close(
                predict(unet, noisy, condition, timesteps, prompt), expected, rtol=0, atol=1e-5
            )


def test_conditional_folder_is_kept_and_a_mismatched_one_is_refused(tmp_path):
    conditional = small_pretrained(8)
    conditional.save_pretrained(tmp_path / "eight")
    kept = build_unet(str(tmp_path / "eight"), channels=4)
    assert kept.config.in_channels == 8
    assert torch.equal(kept.conv_in.weight, conditional.conv_in.weight)

    small_pretrained(5).save_pretrained(tmp_path / "five")
    with pytest.raises(ValueError, match=r"^model\.unet: .* 5 input channels; accepts 4 .* or 8"):
        build_unet(str(tmp_path / "five"), channels=4)
    small_pretrained(4, out_channels=3).save_pretrained(tmp_path / "out3")
    with pytest.raises(ValueError, match=r"^model\.unet: .* 3 output channels"):
        build_unet(str(tmp_path / "out3"), channels=4)


def test_base_round_trip_is_exact_and_safetensors_only(tmp_path):
    unet = trained_base()
    null_prompt = torch.randn(1, 3, unet.config.cross_attention_dim)
    save_base(unet, tmp_path / "base", null_prompt)
    files = sorted(p.name for p in (tmp_path / "base").iterdir())
    assert files == [
        "config.json",
        "diffusion_pytorch_model.safetensors",
        "null_prompt.safetensors",
    ]
    assert torch.equal(load_null_prompt(tmp_path / "base"), null_prompt)
    loaded = load_base(tmp_path / "base")
    assert loaded.config.in_channels == 6
    batch = inputs()
    with torch.no_grad():
        assert torch.equal(predict(loaded, *batch), predict(unet, *batch))


# --- quantisation -----------------------------------------------------------------------------


def test_quantize_without_optimum_quanto_is_one_line(lora, monkeypatch):
    monkeypatch.setitem(sys.modules, "optimum", None)  # absent, whatever this venv holds
    monkeypatch.setitem(sys.modules, "optimum.quanto", None)
    model = add_lora(trained_base(), lora)
    with pytest.raises(UserError) as error:
        quantize_frozen(model, "qfloat8")
    assert str(error.value) == (
        "model.quantize_base: qfloat8 needs optimum-quanto; "
        "pip install optimum-quanto, or set it to null"
    )

    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert quantize_frozen(model, None) is None
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
