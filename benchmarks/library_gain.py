"""Each plotting library's gain, the base alone's and what adapting bought, on a run's own shards.

After `dvc repro` (or when evaluate cannot be waited for): the first K charts (by id) of each
library on the split evaluate scores it on (test; held_out for a held-out library), every domain
and level, restored in 1 DDIM step by the last curriculum adapter and by the base alone; PSNR
only, no deskew (both models restore the same inputs). Means over the cells with the bootstrap
interval evaluate uses, and the worst sharp chart (gaussian easy's) through the adapter. Writes
benchmarks/results/library_gain.json.

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

K = int(sys.argv[1]) if len(sys.argv) > 1 else 4
p = load_params("params.yaml")
index = pl.read_parquet(paths.IMAGES_PARQUET)
lib = {r["id"]: r["library"] for r in index.iter_rows(named=True)}
held = set(p.data.charts.held_out)
adapted = Restorer.from_params(p, paths.adapter("hard"), "cpu")
base = Restorer.from_params(p, None, "cpu")
out = {}
t0 = time.time()
for library in ("plotnine", "vegalite", "matplotlib"):
    split = "held_out" if library in held else "test"
    ids = sorted(
        {
            i
            for i, name in lib.items()
            if name == library and index.filter(pl.col("id") == i)["split"][0] == split
        }
    )[:K]
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
    out[library] = res
    print(library, json.dumps(res), round(time.time() - t0), flush=True)
Path("benchmarks/results/library_gain.json").write_text(
    json.dumps({"cpu": cpu_model(), "charts_per_library": K, "libraries": out}, indent=2) + "\n"
)
