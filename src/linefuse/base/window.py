"""One window of the base's training (`linefuse base-window`, make base-window): a GPU lent for
minutes at a time trains the shipped base further, and the windows add up.

A window resumes the last one's stable state (weights, AdamW moments, step, pairs seen, the next
chart to draw), draws new charts on the host's cores while it trains (linefuse.data.
device_charts: the bank moves on from window to window) and degrades them on the device
(linefuse.data.degrade_torch). The learning rate follows warmup-stable-decay (MiniCPM; Hägele
et al. 2024): a warmup in the first window, then constant, so any window can resume where the
last stopped; the stable state is saved, and a short cool-down from it (1 - sqrt to zero) makes
the weights the window offers to ship. On a device kind no window has trained on, the first
seconds measure the settings that set the speed (batch, channels_last, precision,
cudnn.benchmark, fused AdamW, torch.compile) on real training steps and keep the fastest; the
state keeps that setting per kind, and the compiled kernels travel beside it
(base/compiled_kernels.py), so a later window on that kind trains at once. Nothing but training
runs on the device: `linefuse base-land` scores the offered weights afterwards, on the CPU.

The step never waits for the device: the losses add up there and are read every
base.window.log_every steps, every draw comes from a generator on the device or from host
values copied through pinned memory, and the charts join the pool between steps.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import lzma
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from accelerate import Accelerator
from safetensors.torch import load as load_tensors
from safetensors.torch import save_file
from torch.utils.flop_counter import FlopCounterMode

from linefuse import paths
from linefuse.base.compiled_kernels import load_kernels, save_kernels
from linefuse.base.device_charts import ChartDrawer, DeviceCharts
from linefuse.base.window_trace import trace_steps
from linefuse.data.degrade_torch import degrade_batch, draw_plan
from linefuse.hardware import choose_device, choose_precision, cpu_model
from linefuse.inference.model import load_base
from linefuse.paths import unet_folder
from linefuse.stage import UserError, atomic_dir, atomic_files
from linefuse.train.diffusion import noise_scheduler
from linefuse.train.model import build_unet, init_from, save_base, zero_prompt
from linefuse.train.step import draw_loss, step_draw

if TYPE_CHECKING:
    from linefuse.params.full import Params

log = logging.getLogger("linefuse")

# dense bf16 tensor-core peak, FLOP/s, by GPU name (NVIDIA's data sheets, SXM parts)
BF16_PEAK = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12}
# the die under each GPU name: a setting measured on one name holds for the others on its die
# (an H200 is an H100's GH100 with more and faster memory), so its window need not tune again
CHIP = {"H100": "GH100", "H200": "GH100", "A100": "GA100"}


@dataclass
class WindowState:
    """Where the windows stand: the schedule's step, the pairs the stable weights have trained on
    and the first chart no window has drawn, over every window so far; and the fastest setting
    each kind of device was measured to train at (a window on a kind already measured trains at
    once instead of trying every setting again)."""

    step: int = 0
    pairs: int = 0
    next_chart: int = 0
    windows: int = 0
    tuned: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Setting:
    """What sets the speed of a step (the tune phase tries each)."""

    batch: int
    channels_last: bool = True
    bf16: bool = True
    cudnn_benchmark: bool = True
    fused_adamw: bool = True
    compiled: bool = False


def load_state(folder: Path | None) -> tuple[dict | None, WindowState]:
    """The last window's stable state (tensors, WindowState) from its files in `folder` (one
    state.safetensors, or its shards), or (None, a fresh WindowState)."""
    files = paths.window_state_files(folder) if folder else []
    if not files:
        return None, WindowState()
    tensors = {}
    for file in files:
        data = file.read_bytes()
        data = lzma.decompress(data) if file.name.endswith(paths.PACKED) else data
        tensors.update(load_tensors(data))
    # the metadata sits in the header: its length in 8 bytes, then the JSON (the format's spec)
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    return tensors, WindowState(**json.loads(header["__metadata__"]["window_state"]))


def pack_state(window: Path, folder: Path) -> list[Path]:
    """The stable state a window wrote in `window`, each file xz-packed into `folder` (replacing
    the one there): the state a base's folder commits is a fifth smaller, room the compiled
    kernels need in the 64 MiB a lent machine is sent. Returns the files written. The files
    there before stay whole until every new one is written."""
    before, files = paths.window_state_files(folder), paths.window_state_files(window)
    finals = [folder / f"{f.name.removesuffix(paths.PACKED)}{paths.PACKED}" for f in files]
    with atomic_files(finals) as tmps:
        for file, final in zip(files, finals, strict=True):
            data = file.read_bytes()
            if not file.name.endswith(paths.PACKED):
                data = lzma.compress(data, preset=9)
            tmps[final].write_bytes(data)
    for old in set(before) - set(finals):
        old.unlink()
    return paths.window_state_files(folder)


def save_state(folder: Path, model: torch.nn.Module, optimizer, state: WindowState) -> list[Path]:
    """Weights (model.*, fp32) and AdamW moments (adam.<i>.exp_avg ..., bf16) as safetensors in
    files of at most paths.WINDOW_FILE_BYTES, each carrying the WindowState: a lent machine
    returns files of 16 MiB at most, and the state must come back whole to be resumed. The
    moments are kept in bf16 (fp32's range, 8 bits of mantissa: AdamW's ratio of the two moves
    by under 1 %), which makes a state 8 bytes a parameter instead of 12. Returns the files."""
    from huggingface_hub import split_torch_state_dict_into_shards

    tensors = {f"model.{k}": v.detach().float().cpu() for k, v in model.state_dict().items()}
    for i, param in enumerate(model.parameters()):
        for key, value in optimizer.state.get(param, {}).items():
            kind = torch.float32 if key == "step" else torch.bfloat16
            tensors[f"adam.{i}.{key}"] = value.detach().to(kind).cpu().reshape(value.shape)
    split = split_torch_state_dict_into_shards(
        tensors,
        filename_pattern=paths.WINDOW_STATE_FILE.replace(".safetensors", "{suffix}.safetensors"),
        max_shard_size=paths.WINDOW_FILE_BYTES,
    )
    meta = {"window_state": json.dumps(asdict(state))}
    for old in paths.window_state_files(folder):  # a state written here before: replaced whole
        old.unlink()
    for name, keys in split.filename_to_tensors.items():
        save_file({k: tensors[k].contiguous() for k in keys}, str(folder / name), metadata=meta)
    return paths.window_state_files(folder)


def make_optimizer(model: torch.nn.Module, lr: float, fused: bool, moments: dict | None):
    """AdamW (fused or foreach kernels) holding `moments` ({i: {step, exp_avg, exp_avg_sq}})."""
    params = list(model.parameters())
    kind = {"fused": True} if fused else {"foreach": True}
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, **kind)
    for i, param in enumerate(params):
        if moments and i in moments:
            step = moments[i]["step"].float().reshape(())
            optimizer.state[param] = {
                "step": step.to(param.device) if fused else step.cpu(),
                # fp32, in the parameter's own layout (channels_last or not): fused kernels need it
                "exp_avg": torch.empty_like(param).copy_(moments[i]["exp_avg"]),
                "exp_avg_sq": torch.empty_like(param).copy_(moments[i]["exp_avg_sq"]),
            }
    return optimizer


def moments_of(optimizer) -> dict:
    """An optimizer's AdamW moments by parameter index, for make_optimizer."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    return {i: dict(optimizer.state[p]) for i, p in enumerate(params) if p in optimizer.state}


def _moments_from_state(tensors: dict) -> dict:
    moments: dict[int, dict] = {}
    for key, value in tensors.items():
        if key.startswith("adam."):
            _, index, name = key.split(".", 2)
            moments.setdefault(int(index), {})[name] = value
    return moments


def wsd_lr(params: Params, step: int) -> float:
    """The stable phase's learning rate at `step` (counted over every window)."""
    window = params.base.window
    return window.lr * min(1.0, (step + 1) / max(1, window.warmup_steps))


class Trainer:
    """The model, its optimizer, the chart pool and the step; `run` trains until told."""

    def __init__(self, params: Params, state_dir: Path | None, workers: int):
        self.params, window = params, params.base.window
        tensors, self.state = load_state(state_dir)
        # the drawing processes fork before the device is touched; one core stays for the steps
        self.drawer = ChartDrawer(params, self.state.next_chart, max(1, workers - 1))
        device = choose_device(params.compute.device)
        self.precision = choose_precision(params.optim.precision, device.value)
        self.accelerator = Accelerator(cpu=device.value == "cpu")
        self.device = self.accelerator.device
        log.info("base-window: device %s (%s)", self.device, device.reason)
        log.info("base-window: precision %s (%s)", self.precision.value, self.precision.reason)
        self.model = build_unet(params.base.unet, 3)
        if tensors:
            weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
            self.model.load_state_dict(weights)
        elif window.init:
            copied, total = init_from(self.model, load_base(unet_folder(window.init)))
            log.info(
                "base-window: the first window starts from %s where shapes match: %d of %d "
                "parameters (the rest as %s's fresh initialisation)",
                window.init,
                copied,
                total,
                params.base.unet,
            )
        self.model = self.accelerator.prepare(self.model)
        self.forward_model = self.model
        self.kernels = state_dir  # the folder whose compiled kernels load before compiling
        self.moments = _moments_from_state(tensors) if tensors else None
        self.optimizer = None  # made by `apply`, with the kernels the setting names
        self.noise = noise_scheduler(params.model)
        self.prompts = zero_prompt(params.base.unet).to(self.device)
        capacity = int(window.pool_gb * 2**30)
        self.pool = DeviceCharts(params, capacity, self.device)
        self.pool.add(self.drawer.wait(window.first_charts))
        self.setting = Setting(window.batch_sizes[0], bf16=self.precision.value == "bf16")
        self.applied: Setting | None = None
        self.log_lines: list[dict] = []

    def apply(self, setting: Setting) -> None:
        """Puts `setting` in force (the model's layout, the optimizer's kernels, compile)."""
        if self.device.type == "cuda":  # a setting stored before channels_last was the rule
            setting = replace(setting, channels_last=True)
        before = self.applied
        layout = torch.channels_last if setting.channels_last else torch.contiguous_format
        self.model.to(memory_format=layout)
        if (
            before is None
            or before.fused_adamw != setting.fused_adamw
            or (before.channels_last != setting.channels_last)
        ):
            moments = moments_of(self.optimizer) if before is not None else self.moments
            self.optimizer = make_optimizer(self.model, 0.0, setting.fused_adamw, moments)
        torch.backends.cudnn.benchmark = setting.cudnn_benchmark
        if setting.compiled and self.forward_model is self.model:
            load_kernels(self.kernels, self.device_kind())
            self.forward_model = torch.compile(self.model)
        elif not setting.compiled:
            self.forward_model = self.model
        self.setting = self.applied = setting

    def flops_per_pair(self) -> float:
        """FLOPs of one training pair (forward and backward), counted on a batch of 8."""
        sharp = torch.rand(8, 3, self.params.base.crop, self.params.base.crop, device=self.device)
        draw = step_draw(self.params, sharp * 2 - 1, sharp * 2 - 1, 0, 0, 0)
        with FlopCounterMode(display=False) as counter:
            prompts = self.prompts.expand(8, -1, -1)
            loss, _ = draw_loss(self.params, self.noise, self.model, draw, prompts)
            loss.backward()
        self.model.zero_grad(set_to_none=True)
        return counter.get_total_flops() / 8

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(
        self,
        phase: str,
        seconds: float | None = None,
        steps: int | None = None,
        lr=None,
        timed=True,
    ):
        """Trains for `seconds` of wall time or `steps` steps at `lr(k)` (k: steps of this call;
        default the stable schedule); returns what the steps did."""
        params, window = self.params, self.params.base.window
        batch, model = self.setting.batch, self.forward_model
        layout = torch.channels_last if self.setting.channels_last else torch.contiguous_format
        autocast = torch.autocast(self.device.type, torch.bfloat16, enabled=self.setting.bf16)
        prompts = self.prompts.expand(batch, -1, -1)
        loss_sum = torch.zeros((), device=self.device)
        if timed:
            self.sync()
        started, done, logged_at = time.perf_counter(), 0, 0
        while (steps is None or done < steps) and (
            seconds is None or time.perf_counter() - started < seconds
        ):
            step = self.state.step
            lr_now = lr(done) if lr is not None else wsd_lr(params, step)
            for group in self.optimizer.param_groups:
                group["lr"] = lr_now
            blurred, sharp = self.pairs(step, batch, layout)
            with self.accelerator.accumulate(model):
                draw = step_draw(params, blurred, sharp, step, 0, self.accelerator.process_index)
                # predict and score in bf16 where chosen; the loss itself is summed in fp32
                with autocast:
                    loss, _ = draw_loss(params, self.noise, model, draw, prompts)
                self.accelerator.backward(loss)
                if params.optim.clip_grad_norm:
                    self.accelerator.clip_grad_norm_(
                        self.model.parameters(), params.optim.clip_grad_norm
                    )
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
            loss_sum += loss.detach()
            done += 1
            self.state.step += 1
            self.state.pairs += batch
            if self.state.step % window.log_every == 0:
                self._log(phase, loss_sum, done - logged_at, lr_now)
                loss_sum, logged_at = torch.zeros((), device=self.device), done
            if self.state.step % 10 == 0 and not self.pool.full(2**21):
                self.pool.add(self.drawer.ready(64))  # the charts drawn since, between steps
        if timed:
            self.sync()
        return {"seconds": time.perf_counter() - started, "steps": done, "pairs": done * batch}

    def pairs(self, step: int, batch: int, layout) -> tuple[torch.Tensor, torch.Tensor]:
        """(blurred, sharp) in [-1, 1] for `step`: crops of the pool degraded as a plan drawn on
        the host says, both seeded by (optim.seed, step)."""
        base = self.params.base
        host = _step_generator(self.params.optim.seed, "host", step)
        device_generator = torch.Generator(device=self.device).manual_seed(
            int(torch.randint(2**62, (1,), generator=host))
        )
        sharp = self.pool.crops(batch, device_generator).float() / 255
        plan = draw_plan(batch, self.params.degrade, base.light, base.light_fraction, host)
        blurred = degrade_batch(sharp, plan, device_generator)
        blurred = (blurred * 2 - 1).contiguous(memory_format=layout)
        return blurred, (sharp * 2 - 1).contiguous(memory_format=layout)

    def data_seconds(self, steps: int = 10) -> float:
        """Seconds per step that making the pairs takes alone (crops and degradations, on the
        device they share with the steps): the data's share of a step, measured apart."""
        self.sync()
        started = time.perf_counter()
        for k in range(steps):
            self.pairs(self.state.step + k, self.setting.batch, torch.contiguous_format)
        self.sync()
        return (time.perf_counter() - started) / steps

    def host_syncs(self) -> int | None:
        """How many times one training step makes the host wait for the GPU (torch's sync debug
        mode counts them); None off a GPU."""
        if self.device.type != "cuda":
            return None
        import warnings

        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.run("tune", steps=1, timed=False)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        return sum("synchroniz" in str(w.message) for w in caught)

    def _log(self, phase: str, loss_sum: torch.Tensor, steps: int, lr: float) -> None:
        """Reads the summed loss (the one wait for the device in `log_every` steps)."""
        loss = float(loss_sum) / max(steps, 1)
        if not math.isfinite(loss):
            raise UserError(
                f"base-window: loss became {loss} at step {self.state.step}; the stable state "
                f"of the last window is kept; lower base.window.lr"
            )
        line = {
            "phase": phase,
            "step": self.state.step,
            "loss": loss,
            "lr": lr,
            "pairs": self.state.pairs,
            "charts": len(self.pool),
            "time": time.time(),
        }
        self.log_lines.append(line)
        log.info(
            "base-window: %s step %d loss %.4f, %d charts",
            phase,
            line["step"],
            loss,
            len(self.pool),
        )

    def tune(self) -> list[dict]:
        """Real training steps under each candidate setting, tune_seconds each after one untimed
        step; keeps the fastest. Returns the table (pairs/s and peak memory per setting)."""
        window, table = self.params.base.window, []
        best = self.setting

        def trial(setting: Setting) -> float:
            self.apply(setting)
            warm = time.perf_counter()
            try:
                self.run("tune", steps=2 if setting.compiled else 1)
                warmup_s = time.perf_counter() - warm
                if self.device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(self.device)
                done = self.run("tune", seconds=window.tune_seconds)
            except (torch.OutOfMemoryError, Exception) as error:  # noqa: BLE001
                # a batch too large for the device, or a compiler that fails, costs the trial only
                if not (setting.compiled or isinstance(error, torch.OutOfMemoryError)):
                    raise
                log.warning("base-window: %s failed (%s)", setting, str(error)[:200])
                table.append({**asdict(setting), "error": str(error)[:300]})
                self.optimizer.zero_grad(set_to_none=True)
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                self.apply(replace(setting, compiled=False, batch=best.batch))
                return 0.0
            rate = done["pairs"] / done["seconds"]
            table.append(
                {
                    **asdict(setting),
                    "pairs_per_s": rate,
                    "seconds": done["seconds"],
                    "pairs": done["pairs"],
                    "warmup_s": warmup_s,
                    **_peak_mb(self.device),
                }
            )
            log.info("base-window: tune %s: %.0f pairs/s", setting, rate)
            return rate

        known = measured_setting(self.state.tuned, self.device_name())
        if known is not None:  # measured on this kind of device by an earlier window: no trials
            self.apply(Setting(**known))
            self.state.tuned.setdefault(self.device_name(), known)
            return table
        rates = {s: trial(s) for s in (replace(best, batch=b) for b in window.batch_sizes)}
        best = max(rates, key=rates.get)
        # channels_last stays on where cuDNN runs bf16 convolutions: it computes them in NHWC, and
        # an NCHW model pays a copy each way around every convolution
        toggles = ["bf16", "cudnn_benchmark", "fused_adamw"]
        toggles += ["compiled"] if window.try_compile else []
        if self.device.type != "cuda":  # bf16 and cudnn are the GPU's; compiling takes minutes
            toggles = ["channels_last", "fused_adamw"]
        for name in toggles:
            if name == "bf16" and not best.bf16:
                continue
            other = replace(best, **{name: not getattr(best, name)})
            rates[other] = trial(other)
            best = max(rates, key=rates.get)
        self.apply(best)
        self.state.tuned[self.device_name()] = asdict(best)
        return table

    def device_name(self) -> str:
        """The GPU's name, or the CPU's model: what a measured setting holds for."""
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        return f"CPU {cpu_model()}"

    def device_kind(self) -> str:
        """The GPU's die where known (its kernels serve every GPU on it), else its name."""
        name = self.device_name()
        return next((die for key, die in CHIP.items() if key in name), name)


def measured_setting(tuned: dict[str, dict], name: str) -> dict | None:
    """The setting an earlier window measured on device `name`, or on another GPU on its die."""
    if name in tuned:
        return tuned[name]
    chip = next((die for key, die in CHIP.items() if key in name), None)
    for other, setting in tuned.items():
        if chip is not None and chip == next((d for k, d in CHIP.items() if k in other), None):
            log.info(
                "base-window: %s trains at the setting measured on %s (same die, %s)",
                name,
                other,
                chip,
            )
            return setting
    return None


def _step_generator(seed: int, kind: str, step: int) -> torch.Generator:
    key = json.dumps(["base-window", seed, kind, step]).encode()
    return torch.Generator().manual_seed(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))


def _peak_mb(device: torch.device) -> dict:
    if device.type != "cuda":
        return {}
    return {"peak_gpu_mb": torch.cuda.max_memory_allocated(device) / 2**20}


def train_window(
    params: Params, out: Path, state_dir: Path | None, deadline: float, workers: int, trace=0
):
    """Trains one window until `deadline` (time.time()) less base.window.finish_seconds; writes
    out/state.safetensors (the stable state), out/candidate (the cooled weights),
    out/compiled.safetensors (where it compiled); returns the window's record (phases, speeds,
    the tune table, the state, the logged steps, and where `trace` steps are asked for, their
    profile: base/window_trace.py). A lent machine returns at most 8 files: the state's shards,
    the candidate's three, the kernels and the record."""
    window, phases = params.base.window, {}
    clock = time.perf_counter()
    trainer = Trainer(params, state_dir, workers)
    start_state = copy.deepcopy(trainer.state)
    phases["setup"] = {"seconds": time.perf_counter() - clock}
    try:
        flops = trainer.flops_per_pair()
        clock = time.perf_counter()
        tune_table = trainer.tune()
        phases["tune"] = {"seconds": time.perf_counter() - clock}
        phases["compile"] = trainer.run("compile", steps=2)  # compiles here, if it compiles
        clock, traced = time.perf_counter(), None
        if trace:
            try:
                traced = trace_steps(trainer, trace)
            except Exception as error:  # noqa: BLE001 - a failed trace must not cost the window
                log.warning("base-window: the trace failed (%s)", str(error)[:200])
                traced = {"error": str(error)[:300]}
            phases["trace"] = {
                "seconds": time.perf_counter() - clock,
                "pairs": trace * trainer.setting.batch,
            }
        data_s = trainer.data_seconds()
        syncs = trainer.host_syncs()
        train_left = deadline - window.finish_seconds - time.time()
        stable_s = max(0.0, train_left * (1 - window.cooldown_fraction))
        phases["stable"] = trainer.run("stable", seconds=stable_s)
        stable_state = replace(
            trainer.state, next_chart=trainer.drawer.next_index, windows=start_state.windows + 1
        )
        out.mkdir(parents=True, exist_ok=True)
        save_state(out, trainer.model, trainer.optimizer, stable_state)
        cool_s = max(0.0, deadline - window.finish_seconds - time.time())
        rate = max(phases["stable"]["steps"], 1) / max(phases["stable"]["seconds"], 1e-9)
        cool_steps = max(1, int(cool_s * rate))
        peak = wsd_lr(params, stable_state.step)
        decay = lambda k: peak * (1 - math.sqrt(min(k, cool_steps) / cool_steps))  # noqa: E731
        phases["cooldown"] = trainer.run("cooldown", steps=cool_steps, lr=decay)
    finally:
        trainer.drawer.close()
    clock = time.perf_counter()
    if trainer.setting.compiled:
        save_kernels(out, trainer.device_kind(), trainer.kernels)
    with atomic_dir(out / paths.WINDOW_CANDIDATE_DIR) as folder:
        save_base(trainer.model, folder, zero_prompt(params.base.unet))
    phases["finish"] = {"seconds": time.perf_counter() - clock}
    for phase in ("stable", "cooldown"):
        phases[phase]["pairs_per_s"] = phases[phase]["pairs"] / max(phases[phase]["seconds"], 1e-9)
    return {
        "device": str(trainer.device),
        "gpu": torch.cuda.get_device_name(trainer.device)
        if trainer.device.type == "cuda"
        else None,
        "precision_reason": trainer.precision.reason,
        "setting": asdict(trainer.setting),
        "tune": tune_table,
        "trace": traced,
        "phases": phases,
        "flops_per_pair": flops,
        "data_seconds_per_step": data_s,
        "host_syncs_per_step": syncs,
        "peak_flops": _peak_flops(trainer.device),
        "charts_drawn": stable_state.next_chart - start_state.next_chart,
        "charts_in_pool": len(trainer.pool),
        "start_state": asdict(start_state),
        "stable_state": asdict(stable_state),
        "candidate_pairs": stable_state.pairs + phases["cooldown"]["pairs"],
        "steps": trainer.log_lines,
        **_peak_mb(trainer.device),
    }


def _peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in BF16_PEAK.items() if key in name), None)


def summarise(record: dict) -> dict:
    """The window's headline: training pairs/s (stable phase), the share of its wall time spent
    in training steps (tune trials, stable, cool-down; not the steps that compile), the pairs it
    trained on, the data's share of a step, and the FLOP rate against the GPU's bf16 peak."""
    phases, wall = record["phases"], record["wall_seconds"]
    tuned = [row for row in record["tune"] if "seconds" in row]
    step_seconds = sum(row["seconds"] for row in tuned)
    step_seconds += phases["stable"]["seconds"] + phases["cooldown"]["seconds"]
    pairs = sum(row["pairs"] for row in tuned)
    pairs += sum(phases[name]["pairs"] for name in ("compile", "stable", "cooldown"))
    pairs += phases.get("trace", {}).get("pairs", 0)
    rate = phases["stable"]["pairs_per_s"]
    step_time = record["setting"]["batch"] / max(rate, 1e-9)
    flops = rate * record["flops_per_pair"]
    peak = record["peak_flops"]
    return {
        "pairs_per_s": rate,
        "pairs": pairs,
        "step_seconds": step_seconds,
        "step_share": step_seconds / wall,
        "data_share_of_step": record["data_seconds_per_step"] / step_time,
        "host_data_wait_seconds": phases["setup"]["seconds"],
        "tflops": flops / 1e12,
        "peak_fraction": flops / peak if peak else None,
    }
