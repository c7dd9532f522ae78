"""Each plotting library's gain, the base alone's and what adapting bought, on a run's own shards.

After `dvc repro` (or when evaluate cannot be waited for): the first K charts (by id) of each
library on the val split, the one a default (steps, rates, shares) is tuned on, so that the
test and held-out splits the README reports never choose one; a held-out library has no val
charts and is measured on held_out, reported beside the others and never tuned on. Every domain
and level, restored in 1 DDIM step by the last curriculum adapter and by the base alone; PSNR
only, no deskew beyond the shards' own (both models restore the same inputs: val's are the
shard stage's centred shards.val_crop crops, straightened as training sees them). Means over the
cells with the bootstrap interval evaluate uses, and the worst sharp chart (gaussian easy's)
through the adapter. Writes benchmarks/results/library_gain.json.

    python benchmarks/library_gain.py [K]
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

from linefuse import paths
from linefuse.data.readers import LmdbPairs
from linefuse.evaluate.intervals import mean_of_means_interval
from linefuse.evaluate.metrics import psnr
from linefuse.hardware import cpu_model
from linefuse.inference.restorer import Restorer
from linefuse.params.full import load_params

LIBRARIES = ("plotnine", "vegalite", "matplotlib")
TUNED_ON = "val"  # the split a default is chosen on; test and held_out are only reported


def scored_split(library: str, held_out: set[str]) -> str:
    """The split a library is scored on: val, or held_out for a held-out library (measured only)."""
    return "held_out" if library in held_out else TUNED_ON


def scored_ids(index: pl.DataFrame, library: str, held_out: set[str], k: int) -> list[str]:
    """The first `k` ids (sorted) of `library`'s charts on its scored split, from images.parquet."""
    rows = index.filter(
        (pl.col("library") == library) & (pl.col("split") == scored_split(library, held_out))
    )
    return sorted(rows["id"].to_list())[:k]


def library_result(p, adapted, base, library: str, ids: list[str], split: str) -> dict:
    """One library's gain, base-alone gain and adapting gain with their intervals, and its sharp
    charts through the adapter."""
    cells = {}
    sharp = []
    for level in p.degrade.levels:
        ds = LmdbPairs(paths.shards(level), split)
        pos = [i for i, m in enumerate(ds.metas) if m["image_id"] in ids]
        pairs = [ds[i] for i in pos]
        ds.close()
        blurred = [b for b, _, _ in pairs]
        ra = adapted.restore_images(blurred, 1, 0, 16)
        rb = base.restore_images(blurred, 1, 0, 16)
        for (b, s, m), a, bb in zip(pairs, ra, rb, strict=True):
            pi = psnr(b, s, p.eval.metric)
            pa = psnr(a, s, p.eval.metric)
            pb = psnr(bb, s, p.eval.metric)
            c = cells.setdefault((m["domain"], level), {"gain": [], "base": [], "adapt": []})
            c["gain"].append(pa - pi)
            c["base"].append(pb - pi)
            c["adapt"].append(pa - pb)
            if level == "easy" and m["domain"] == "gaussian":
                sharp.append(s)
    rs = adapted.restore_images(sharp, 1, 0, 16)
    sp = [psnr(r, s, p.eval.metric) for r, s in zip(rs, sharp, strict=True)]
    res = {
        "split": split,
        "charts": len(ids),
        "images": sum(len(c["gain"]) for c in cells.values()),
    }
    for k in ("gain", "base", "adapt"):
        iv = mean_of_means_interval([c[k] for c in cells.values()], p.eval.interval, 0)
        res[k] = {kk: (round(v, 3) if isinstance(v, float) else v) for kk, v in iv.items()}
    res["sharp_min_psnr"] = round(min(sp), 2)
    res["sharp_mean_psnr"] = round(float(np.mean(sp)), 2)
    return res


def main(k: int) -> None:
    p = load_params("params.yaml")
    index = pl.read_parquet(paths.IMAGES_PARQUET)
    held = set(p.data.charts.held_out)
    adapted = Restorer.from_params(p, paths.adapter("hard"), "cpu")
    base = Restorer.from_params(p, None, "cpu")
    out = {}
    t0 = time.time()
    for library in LIBRARIES:
        ids = scored_ids(index, library, held, k)
        out[library] = library_result(p, adapted, base, library, ids, scored_split(library, held))
        print(library, json.dumps(out[library]), round(time.time() - t0), flush=True)
    Path("benchmarks/results/library_gain.json").write_text(
        json.dumps({"cpu": cpu_model(), "charts_per_library": k, "libraries": out}, indent=2) + "\n"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
