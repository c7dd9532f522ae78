"""evaluate's scoring: each pair's PSNR, SSIM, line-fidelity and tick-label errors against its
sharp image, and its data digitized with no sidecar against the chart's own, in forked workers,
gathered into one split's cells (domain x level).

Every list below is image-aligned within its cell: the n-th value of each method belongs to the
cell's n-th pair, so the tables can pair the model with its input image by image.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from linefuse.data.labels import normalise, readable
from linefuse.digitize import ocr
from linefuse.digitize.chart import digitize_many
from linefuse.digitize.curves import ChartTruth, curve_errors, shown_columns
from linefuse.digitize.score import reading_score
from linefuse.evaluate.baselines import baselines
from linefuse.evaluate.chart_metrics import chart_errors
from linefuse.evaluate.metrics import psnr, ssim

if TYPE_CHECKING:
    from linefuse.params.full import Params

# Pairs a scoring task takes: their tick labels are read in one Tesseract call, and the workers
# still share a level's pairs evenly
PAIRS_PER_TASK = 4


def _lists() -> defaultdict:
    return defaultdict(list)


@dataclass
class Cell:
    """One domain x level's per-image scores: PSNR and SSIM per method; the line-fidelity figures
    of the input, the model and the sharp image (chart[method][figure]); and the tick labels'
    readings of the same three as (edits, characters, labels), edits None where not read; the
    same three digitized with no sidecar as (calibrated, curve error in % of the y range,
    task-6b line score); the plotting library that drew each image (`libraries`), each read one
    (`ocr_libraries`) and each digitized one (`digitized_libraries`), "" for an image without a
    sidecar."""

    psnr: dict[str, list[float]] = field(default_factory=_lists)
    ssim: dict[str, list[float]] = field(default_factory=_lists)
    chart: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(_lists))
    ocr: dict[str, list[tuple]] = field(default_factory=_lists)
    digitized: dict[str, list[tuple]] = field(default_factory=_lists)
    libraries: list[str] = field(default_factory=list)
    ocr_libraries: list[str] = field(default_factory=list)
    digitized_libraries: list[str] = field(default_factory=list)

    def of_library(self, library: str) -> Cell:
        """The same cell kept to the images `library` drew."""
        mine = [i for i, name in enumerate(self.libraries) if name == library]
        read = [i for i, name in enumerate(self.ocr_libraries) if name == library]
        digitized = [i for i, name in enumerate(self.digitized_libraries) if name == library]
        return Cell(
            psnr=defaultdict(list, {n: [v[i] for i in mine] for n, v in self.psnr.items()}),
            ssim=defaultdict(list, {n: [v[i] for i in mine] for n, v in self.ssim.items()}),
            chart=defaultdict(
                _lists,
                {
                    n: defaultdict(list, {f: [v[i] for i in mine] for f, v in by.items()})
                    for n, by in self.chart.items()
                },
            ),
            ocr=defaultdict(list, {n: [v[i] for i in read] for n, v in self.ocr.items()}),
            digitized=defaultdict(
                list, {n: [v[i] for i in digitized] for n, v in self.digitized.items()}
            ),
            libraries=[library] * len(mine),
            ocr_libraries=[library] * len(read),
            digitized_libraries=[library] * len(digitized),
        )


@dataclass
class Scores:
    """One split's scores: its cells, by domain then level in the order first scored, and the
    sharp images it showed (image_id -> ...), each scored and read once."""

    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)
    showcase: dict = field(default_factory=dict)  # (domain, level) -> blurred, restored, sharp
    sharp: dict = field(default_factory=dict)  # its sharp image, for the sharp row
    sharp_psnr: list = field(default_factory=list)  # PSNR of the model's output on each of them
    sharp_figures: dict = field(default_factory=dict)  # its sharp image's _figures
    sharp_shown: dict = field(default_factory=dict)  # where it shows the curve
    sharp_ocr: dict = field(default_factory=dict)  # its sharp image's tick-label reading
    sharp_digitized: dict = field(default_factory=dict)  # its sharp image digitized, scored

    sharp_library: dict = field(default_factory=dict)  # the library that drew it

    def cell(self, domain: str, level: str) -> Cell:
        return self.cells.setdefault(domain, {}).setdefault(level, Cell())

    def of_library(self, library: str) -> Scores:
        """These scores kept to the images `library` drew (cells it has no image in left out)."""
        cells = {
            domain: {level: cell.of_library(library) for level, cell in by_level.items()}
            for domain, by_level in self.cells.items()
        }
        cells = {
            domain: {level: cell for level, cell in by_level.items() if cell.libraries}
            for domain, by_level in cells.items()
        }
        mine = [self.sharp_library.get(image_id) == library for image_id in self.sharp]
        return Scores(
            cells={domain: by_level for domain, by_level in cells.items() if by_level},
            sharp_psnr=[v for v, keep in zip(self.sharp_psnr, mine, strict=True) if keep],
        )

    def libraries(self) -> list[str]:
        """The libraries that drew this split's images, in the order first scored."""
        return [name for name in dict.fromkeys(self.sharp_library.values()) if name]


class PairScores(NamedTuple):
    """What one pair's scoring returns (from a worker: plain values only)."""

    psnr: dict[str, float]  # method -> PSNR
    ssim: dict[str, float]
    figures: dict[str, dict[str, float]]  # input and model -> figure -> value
    ticks: dict[str, tuple]  # input, model (and sharp when asked) -> (edits, characters, labels)
    # input, model (and sharp when asked) -> (calibrated, error %, task-6b line score)
    digitized: dict[str, tuple]


def first_per_domain(metas: list[dict], count: int | None) -> list[int]:
    """Positions of the first `count` samples of each domain (all of them when count is None)."""
    taken: dict[str, int] = defaultdict(int)
    chosen = []
    for position, meta in enumerate(metas):
        if count is None or taken[meta["domain"]] < count:
            taken[meta["domain"]] += 1
            chosen.append(position)
    return chosen


def spread_per_domain(metas: list[dict], count: int | None) -> list[int]:
    """Positions of `count` samples of each domain (all of them when count is None), each
    domain's from charts no other domain's come from while such charts remain: the samples of
    a split come chart by chart, so the first `count` of each domain would be the same few
    charts in every domain; spread, as many images read many more charts."""
    if count is None:
        return list(range(len(metas)))
    taken: dict[str, int] = defaultdict(int)
    charts: set[str] = set()
    chosen: set[int] = set()
    for unseen_only in (True, False):
        for position, meta in enumerate(metas):
            if position in chosen or taken[meta["domain"]] >= count:
                continue
            if unseen_only and meta["image_id"] in charts:
                continue
            taken[meta["domain"]] += 1
            charts.add(meta["image_id"])
            chosen.add(position)
    return sorted(chosen)


def _offset(image: np.ndarray, truth: ChartTruth) -> tuple[int, int]:
    """Where a sample, its chart's centred crop or the whole chart, lies in the chart."""
    return (truth.height - image.shape[0]) // 2, (truth.width - image.shape[1]) // 2


def _labels_in(image: np.ndarray, truth: ChartTruth | None) -> list[ocr.Label]:
    """The chart's tick labels that lie whole inside `image` (the chart or a centred crop of it),
    their boxes in its pixels; only those written in the readers' alphabet (labels.readable:
    Tesseract reads nothing else, and a log axis's 10ⁿ is no such label)."""
    if truth is None:
        return []
    top, left = _offset(image, truth)
    height, width = image.shape[:2]
    inside = []
    for label in (label for label in truth.labels if readable(label.text)):
        x0, y0, x1, y1 = label.box
        box = (x0 - left, y0 - top, x1 - left, y1 - top)
        if box[0] >= 0 and box[1] >= 0 and box[2] <= width and box[3] <= height:
            inside.append(ocr.Label(label.text, box))
    return inside


def _figures(
    image: np.ndarray, sharp: np.ndarray, truth: ChartTruth | None, shown: np.ndarray | None
) -> dict:
    """The line-fidelity errors of one image: in pixels from the column profile, and with the
    chart's ground truth in its own units, judged where the sharp sample shows the curve
    (`shown`, from curves.shown_columns)."""
    figures = chart_errors(image, sharp)
    if truth is not None:
        errors = curve_errors(image, truth, _offset(image, truth), shown)
        # charts plot counts, percent or a.u.: a mean over charts needs each chart's own scale
        span = float(np.ptp(truth.intensity)) or 1.0
        figures |= errors | {
            f"{name}_pct_of_range": 100 * errors[name] / span
            for name in ("peak_height_error", "curve_rmse")
        }
    return figures


def score_pairs(tasks: list[tuple]) -> list[PairScores]:
    """For each pair: PSNR and SSIM of the input, the classical baselines and every model output
    against its sharp image, the line-fidelity errors of the input and the model, the tick
    labels' reading errors and the data digitized with no sidecar of the input, the model (read
    with the straightened input it was restored from, as `linefuse digitize` reads it) and
    (when asked) the sharp image. The labels of the whole batch are read in one Tesseract call,
    and so are the digitized charts': starting Tesseract costs more than reading a pair's
    labels."""
    scored, reads, digitizing = [], [], []
    for task in tasks:
        blurred, sharp, meta, outputs, truth, shown, settings, labels, read_sharp, chart = task
        methods = {
            "input": blurred,
            **baselines(blurred, meta["domain"], meta["params"], settings.baselines),
        }
        methods |= {name: image for name, image in outputs.items() if image is not None}
        model = f"model_s{settings.steps}"
        scored.append(
            (
                {name: psnr(image, sharp, settings.metric) for name, image in methods.items()},
                {name: ssim(image, sharp, settings.metric) for name, image in methods.items()},
                {
                    "input": _figures(blurred, sharp, truth, shown),
                    model: _figures(methods[model], sharp, truth, shown),
                },
            )
        )
        pair = {"input": blurred, model: methods[model]}
        read = pair | ({"sharp": sharp} if read_sharp else {})
        reads.append((read if labels else {}, labels))
        path, with_sharp, restored_from = chart or (None, False, None)
        named = pair | ({"sharp": sharp} if with_sharp else {}) if chart else {}
        digitizing.append((named, path, {model: restored_from}))
    errors = iter(
        ocr.label_errors([(image, labels) for read, labels in reads for image in read.values()])
    )
    results = iter(
        digitize_many(
            [image for named, _, _ in digitizing for image in named.values()],
            [given.get(name) for named, _, given in digitizing for name in named],
        )
    )
    return [
        PairScores(
            *figures,
            {name: (*next(errors), len(labels)) for name in read},
            {name: reading_score(next(results), path) for name in named},
        )
        for figures, (read, labels), (named, path, _) in zip(scored, reads, digitizing, strict=True)
    ]


def _one_thread() -> None:
    """A scoring worker's start: it shares the cores with its siblings."""
    torch.set_num_threads(1)


def _map_in_one_thread(function: Callable, tasks: list) -> list:
    """The builtin map with torch on one thread, as in a scoring worker: torch's FFT (in
    Richardson-Lucy) rounds differently on 1 and 2 threads, which moves a cell mean in its last
    digits, and the scores must not depend on the worker count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [function(task) for task in tasks]
    finally:
        torch.set_num_threads(threads)


@contextmanager
def scoring_map(workers: int) -> Iterator[Callable]:
    """An ordered map for scoring: forked workers when workers > 1, else one thread here.

    Scoring (baselines, SSIM, reading the curve back) runs on one core while the model runs on
    all of them, so a few scorers beside it shorten evaluate with the same scores
    (benchmarks/scoring.py). The workers are forked when evaluate starts, before the model is
    built, and results come back in task order. An executor rather than multiprocessing's Pool:
    a worker that dies raises BrokenProcessPool where a Pool waits for it forever, and an error
    cancels the tasks not yet started instead of terminating workers mid-write.
    """
    if workers <= 1:
        yield _map_in_one_thread
        return
    fork = get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=fork, initializer=_one_thread) as pool:
        pool.submit(int).result()  # a fork executor forks all its workers at the first task
        try:
            yield pool.map
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def _sharp_of(scores: Scores, image_id: str, sharp: np.ndarray, truth: ChartTruth | None):
    """Where the sharp image shows the curve and its own figures, found once per image (the same
    sharp image is in every cell)."""
    if image_id not in scores.sharp_figures:
        shown = shown_columns(sharp, truth, _offset(sharp, truth)) if truth else None
        scores.sharp_shown[image_id] = shown
        scores.sharp_figures[image_id] = _figures(sharp, sharp, truth, shown)
    return scores.sharp_shown[image_id]


def score_level(
    pairs: list[tuple],
    inputs: list[np.ndarray],
    level: str,
    outputs: dict[str, list],
    params: Params,
    scores: Scores,
    truths: dict[str, ChartTruth],
    scoring_map: Callable,
    reading: bool,
) -> None:
    """Scores the input, the classical baselines and every model output of one level's pairs
    (restored from `inputs`, their blurred images straightened);
    the line-fidelity errors for the input, the model and the sharp image itself (the floor of
    reading the line back); on eval.ocr.max_images pairs of each domain (spread_per_domain),
    the tick labels' reading errors (`reading`: Tesseract is here; else recorded as not read);
    and on eval.digitize.max_images whole charts of each domain (spread_per_domain), their data
    digitized with no sidecar (`reading` too), the sharp chart's once."""
    tasks, ticks = [], []
    metas = [pair[2] for pair in pairs]
    chosen = set(spread_per_domain(metas, params.eval.ocr.max_images))
    digitized = set(spread_per_domain(metas, params.eval.digitize.max_images)) if reading else ()
    asked, asked_digitized = set(), set()  # images whose sharp chart a task reads, digitizes
    for index, (blurred, sharp, meta) in enumerate(pairs):
        image_id, truth = meta["image_id"], truths.get(meta["image_id"])
        shown = _sharp_of(scores, image_id, sharp, truth)
        own = {name: images[index] for name, images in outputs.items()}
        labels = _labels_in(sharp, truth) if index in chosen else []
        read_sharp = bool(labels) and image_id not in scores.sharp_ocr and image_id not in asked
        if read_sharp:
            asked.add(image_id)
        read = labels if reading else []
        chart = None
        if index in digitized and _whole_chart(sharp, truth):
            new = image_id not in scores.sharp_digitized and image_id not in asked_digitized
            asked_digitized.add(image_id)
            chart = (truth.source, new, inputs[index])
        task = (blurred, sharp, meta, own, truth, shown, params.eval, read, read_sharp, chart)
        tasks.append(task)
        ticks.append(labels)
    model = f"model_s{params.eval.steps}"
    batches = [
        tasks[first : first + PAIRS_PER_TASK] for first in range(0, len(tasks), PAIRS_PER_TASK)
    ]
    results = [result for batch in scoring_map(score_pairs, batches) for result in batch]
    for task, labels, result in zip(tasks, ticks, results, strict=True):
        blurred, sharp, meta, own = task[:4]
        cell = scores.cell(meta["domain"], level)
        truth = truths.get(meta["image_id"])
        library = truth.library if truth is not None else ""
        scores.sharp_library.setdefault(meta["image_id"], library)
        cell.libraries.append(library)
        for name, value in result.psnr.items():
            cell.psnr[name].append(value)
            cell.ssim[name].append(result.ssim[name])
        figures = result.figures | {"sharp": scores.sharp_figures[meta["image_id"]]}
        for name, by_figure in figures.items():
            for figure, value in by_figure.items():
                cell.chart[name][figure].append(value)
        _record_ticks(cell, scores.sharp_ocr, meta, labels, result.ticks, model)
        if result.digitized:
            if "sharp" in result.digitized:  # the first pair that shows this chart
                scores.sharp_digitized[meta["image_id"]] = result.digitized["sharp"]
            read = result.digitized | {"sharp": scores.sharp_digitized[meta["image_id"]]}
            for name in ("input", model, "sharp"):
                cell.digitized[name].append(read[name])
            cell.digitized_libraries.append(library)
        scores.showcase.setdefault((meta["domain"], level), (blurred, own[model], sharp))


def _whole_chart(image: np.ndarray, truth: ChartTruth | None) -> bool:
    """Whether `image` is the whole chart its truth describes (not a crop of it): only a whole
    chart's axes can be read and scored against its sidecar."""
    return truth is not None and image.shape[:2] == (truth.height, truth.width)


def _record_ticks(
    cell: Cell, sharp_ocr: dict, meta: dict, labels: list, errors: dict, model: str
) -> None:
    """Adds one pair's tick-label errors to its cell, with its sharp image's (read by the first
    pair that shows it). Labels not read (no Tesseract) count as (None, characters, labels)."""
    if not labels:
        return
    if not errors:
        drawn = sum(len(normalise(label.text)) for label in labels)
        errors = {name: (None, drawn, len(labels)) for name in ("input", model, "sharp")}
    if "sharp" in errors:
        sharp_ocr[meta["image_id"]] = errors["sharp"]
    errors = errors | {"sharp": sharp_ocr[meta["image_id"]]}
    for name in ("input", model, "sharp"):
        cell.ocr[name].append(errors[name])
    cell.ocr_libraries.append(cell.libraries[-1])


def _centre(image: np.ndarray, size: int) -> np.ndarray:
    height, width = image.shape[:2]
    top, left = max(0, (height - size) // 2), max(0, (width - size) // 2)
    return image[top : top + size, left : left + size]


def sweep_level(
    pairs: list[tuple], level: str, restore: Callable, params: Params, swept: Scores
) -> None:
    """The first `eval.sweep.samples` test images of each domain, cut to one centred tile (so a
    step count costs one batched model call): PSNR of the input, the classical baselines and the
    model at every step count of the sweep, into the cells' psnr of `swept`."""
    chosen = first_per_domain([meta for _, _, meta in pairs], params.eval.sweep.samples)
    size = params.tiles.size
    crops = [(_centre(pairs[i][0], size), _centre(pairs[i][1], size), pairs[i][2]) for i in chosen]
    restored = {count: restore([c[0] for c in crops], count) for count in params.eval.sweep.steps}
    for position, (blurred, sharp, meta) in enumerate(crops):
        methods = {
            "input": blurred,
            **baselines(blurred, meta["domain"], meta["params"], params.eval.baselines),
        }
        methods |= {f"model_s{count}": images[position] for count, images in restored.items()}
        cell = swept.cell(meta["domain"], level)
        for name, image in methods.items():
            cell.psnr[name].append(psnr(image, sharp, params.eval.metric))
