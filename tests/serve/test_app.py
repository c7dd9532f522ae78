"""serve: `linefuse serve` over HTTP restores uploads, refuses bad requests, answers /health while
it works, and drops work whose client has gone or whose time is up."""

from __future__ import annotations

import base64
import io
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from contextlib import chdir
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from linefuse.data.charts import draw_chart
from linefuse.digitize.chart import Unreadable, digitize
from linefuse.digitize.outputs import csv_text
from linefuse.params.full import load_params
from linefuse.serve.app import STEP_DELAY_ENV

from conftest import CHROMIUM, ROOT, needs_chromium, needs_tesseract, tiny_params, write_params

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def _models_only(trained_project: Path, folder: Path) -> Path:
    """A folder holding only what restoring needs: models/ and params.yaml (no data/)."""
    folder.mkdir(parents=True)
    shutil.copytree(trained_project / "models", folder / "models")
    shutil.copy(trained_project / "params.yaml", folder / "params.yaml")
    return folder


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# every sampler step of the test servers lasts at least this long, so that a 10-step restore
# outlasts what a test does meanwhile on any machine (linefuse.serve.app.STEP_DELAY_ENV)
STEP_DELAY_S = 0.4


def _serve(project, **serve_settings):
    """`linefuse serve` on a free port in `project` (models/ and params.yaml only), until the
    generator is closed."""
    params = tiny_params()
    params["serve"].update(serve_settings)
    write_params(project, params)
    port = _free_port()
    process = subprocess.Popen(
        ["linefuse", "serve", "--port", str(port)],
        cwd=project,
        env={**ENV, STEP_DELAY_ENV: str(STEP_DELAY_S)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    else:
        process.kill()
        pytest.fail(process.stderr.read().decode()[-2000:])
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(trained_project, tmp_path_factory):
    project = _models_only(trained_project, tmp_path_factory.mktemp("serve") / "project")
    yield from _serve(project, max_upload_mb=0.05, max_pixels=100_000, max_steps=10, max_queue=1)


@pytest.fixture(scope="module")
def strict_server(trained_project, tmp_path_factory):
    """A one-second time limit per request."""
    project = _models_only(trained_project, tmp_path_factory.mktemp("strict") / "project")
    yield from _serve(project, max_pixels=100_000, max_steps=10, max_queue=1, timeout_s=1.0)


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def test_evaluate_restore_serve_and_the_pipeline_agree(server, trained_project, tmp_path):
    """One transparent chart, wider than the suite's tiles (so tiled), through the four paths:
    evaluate's restorer call (straightened once, then restore_images), `linefuse restore` and
    POST /restore, all three on ONNX Runtime (the suite's eval.runtime), give the same restored
    pixels and restore and serve the same PNG bytes; the pipeline `dvc repro` saved in
    models/pipeline with the last adapter, loaded with from_pretrained alone, runs the same
    model on torch: all but a thousandth of its pixels the same."""
    from scipy import ndimage

    from linefuse.data.deskew import straighten
    from linefuse.data.images import load_rgb
    from linefuse.inference.pipeline import LineFusePipeline
    from linefuse.inference.restorer import Restorer

    from conftest import run_cli

    chart = np.full((150, 200, 3), 255, np.uint8)
    chart[50:53, :] = (200, 30, 30)
    chart[:, 120:122] = 0
    chart = np.clip(np.rint(ndimage.gaussian_filter(chart.astype(float), (1.2, 1.2, 0))), 0, 255)
    rgba = Image.fromarray(chart.astype(np.uint8)).convert("RGBA")
    alpha = np.full((150, 200), 255, np.uint8)
    alpha[:, :20] = 0  # composited over white by every path
    rgba.putalpha(Image.fromarray(alpha))
    path = tmp_path / "chart.png"
    rgba.save(path)

    assert (
        run_cli(
            trained_project, "restore", str(path), "--steps", "1", "--out", str(tmp_path / "out")
        )
        == 0
    )
    by_restore = (tmp_path / "out/chart.png").read_bytes()
    served = httpx.post(
        f"{server}/restore",
        params={"steps": 1},
        timeout=120,
        files={"file": ("chart.png", path.read_bytes(), "image/png")},
    )
    assert served.status_code == 200 and served.content == by_restore

    pipe = LineFusePipeline.from_pretrained(trained_project / "models/pipeline")
    pipe.load_adapter(trained_project / "models/lora/hard")
    by_pipeline = np.asarray(pipe(Image.open(path), steps=1).images[0])
    expected = np.asarray(Image.open(io.BytesIO(by_restore)))
    assert (by_pipeline == expected).all(axis=2).mean() >= 0.999
    assert not np.array_equal(expected, load_rgb(path))

    with chdir(trained_project):  # as the evaluate stage runs, in the project
        params = load_params("params.yaml")
        restorer = Restorer.from_params(params, "models/lora/hard", "cpu")
    straight = straighten(load_rgb(path), params.eval.deskew)
    by_evaluate = restorer.restore_images([straight], 1, params.eval.seed)[0]
    assert restorer.runtime.value == "onnx" and np.array_equal(by_evaluate, expected)


def test_http_service_restores_and_refuses_bad_requests(server):
    health = httpx.get(f"{server}/health").json()
    assert health["status"] == "ok" and health["default_adapter"] == "hard"
    assert health["runtime"] == {"hard": "onnx"}  # models/onnx: the default adapter's export
    assert httpx.get(f"{server}/adapters").json()["adapters"] == ["easy", "hard", "medium"]

    image = np.full((40, 56, 3), 255, np.uint8)
    image[20, :] = 0
    answer = httpx.post(
        f"{server}/restore",
        params={"steps": 2, "adapter": "easy"},
        files={"file": ("chart.png", _png(image), "image/png")},
        timeout=60,
    )
    assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(answer.content)).size == (56, 40)

    def post(payload: bytes, **query) -> httpx.Response:
        return httpx.post(
            f"{server}/restore",
            params=query,
            timeout=60,
            files={"file": ("x.png", payload, "image/png")},
        )

    assert post(b"plain text, not an image").status_code == 422
    assert post(_png(image), steps=0).status_code == 422
    assert post(_png(image), steps=11).status_code == 422
    assert post(_png(image), adapter="nope").status_code == 422
    assert post(_png(np.zeros((400, 400, 3), np.uint8))).status_code == 413  # 160000 px
    noise = np.random.default_rng(0).integers(0, 256, (150, 150, 3), dtype=np.uint8)
    assert post(_png(noise)).status_code == 413  # about 67 KB > 0.05 MB
    assert httpx.post(f"{server}/restore", timeout=60).status_code == 422  # no file at all


@needs_tesseract
def test_digitize_returns_the_series_read_from_the_chart_or_why_not(server):
    """POST /digitize: a sharp default chart (restore=false) gives the CSV digitize() reads from
    it here, format=json adds its axes and overlay; restored first (the default), the CSV of the
    image /restore returns, read with the chart sent; a blank frame is 422 with the reason."""
    chart = ROOT / "tests/digitize/fixtures/chart_00005.png"
    pixels = np.asarray(Image.open(chart).convert("RGB"))

    def post(image: np.ndarray, **query) -> httpx.Response:
        files = {"file": ("chart.png", _png(image), "image/png")}
        return httpx.post(f"{server}/digitize", params=query, files=files, timeout=120)

    sharp = post(pixels, restore="false")
    assert sharp.status_code == 200 and sharp.headers["content-type"].startswith("text/csv")
    assert sharp.text == csv_text(digitize(pixels))
    shown = post(pixels, restore="false", format="json").json()
    assert shown["csv"] == sharp.text and shown["axes"]["x"]["scale"] == "linear"
    overlay = Image.open(io.BytesIO(base64.b64decode(shown["overlay_png"])))
    assert overlay.size == (3 * pixels.shape[1], 3 * pixels.shape[0])

    restored = httpx.post(
        f"{server}/restore", files={"file": ("c.png", _png(pixels), "image/png")}, timeout=120
    )
    restored = np.asarray(Image.open(io.BytesIO(restored.content)).convert("RGB"))
    answer = post(pixels)
    try:
        assert answer.status_code == 200 and answer.text == csv_text(digitize(restored, pixels))
    except Unreadable as why:
        assert answer.status_code == 422 and answer.json()["detail"] == str(why)
    blank = post(np.full((150, 200, 3), 255, np.uint8), restore="false")
    assert blank.status_code == 422 and "no axis" in blank.json()["detail"]


def test_the_batch_endpoint_returns_a_zip_of_each_image_restored(server):
    """Three uploads of different sizes: a zip of NNN-NAME.png in upload order, each the same
    bytes as the single-image endpoint gives; one bad file fails the request, named."""
    rng = np.random.default_rng(3)
    images = {
        f"chart{i}.png": rng.integers(200, 256, (24 + 8 * i, 40, 3), dtype=np.uint8)
        for i in range(3)
    }
    files = [("files", (name, _png(image), "image/png")) for name, image in images.items()]
    answer = httpx.post(f"{server}/restore/batch", params={"steps": 2}, files=files, timeout=120)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        names = archive.namelist()
        restored = [archive.read(name) for name in names]
    assert names == ["000-chart0.png", "001-chart1.png", "002-chart2.png"]
    for (name, image), png in zip(images.items(), restored, strict=True):
        single = httpx.post(
            f"{server}/restore",
            params={"steps": 2},
            timeout=60,
            files={"file": (name, _png(image), "image/png")},
        )
        assert single.content == png
    files.append(("files", ("notes.png", b"plain text", "image/png")))
    refused = httpx.post(f"{server}/restore/batch", files=files, timeout=60)
    assert refused.status_code == 422 and refused.json()["detail"].startswith("notes.png: not an")


def test_health_answers_while_a_restore_runs_and_a_full_queue_gets_503(server):
    """A 240 x 300 upload at ten steps keeps the one worker busy for at least 10 x STEP_DELAY_S:
    /health still answers, every probe returning before the restore ends (so it never waits
    behind it), and with serve.max_queue 1 a second restore is refused at once with 503 and
    Retry-After; the first still completes."""
    ramp = np.linspace(0, 255, 300, dtype=np.float64)[None, :, None]
    image = np.broadcast_to(ramp, (240, 300, 3)).astype(np.uint8)
    results = {}

    def slow() -> None:
        results["slow"] = httpx.post(
            f"{server}/restore",
            params={"steps": 10},
            timeout=300,
            files={"file": ("a.png", _png(image), "image/png")},
        )

    worker = threading.Thread(target=slow)
    worker.start()
    _wait_for(server, in_flight=1)  # the upload is in and the restore has started
    refused = httpx.post(
        f"{server}/restore",
        params={"steps": 1},
        timeout=60,
        files={"file": ("b.png", _png(image[:32, :32]), "image/png")},
    )
    latencies = []
    for _ in range(5):
        started = time.perf_counter()
        assert httpx.get(f"{server}/health", timeout=5).status_code == 200
        latencies.append(time.perf_counter() - started)
    still_running = worker.is_alive()
    worker.join()
    assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
    assert still_running, "the restore ended before the probes: make it longer"
    # not waiting behind the restore is what still_running shows; a second is far below the
    # restore's time and far above a loaded 2-core machine's scheduling delays
    assert max(latencies) < 1.0, latencies
    assert results["slow"].status_code == 200
    assert Image.open(io.BytesIO(results["slow"].content)).size == (300, 240)


def _wait_for(url: str, in_flight: int) -> None:
    """Until /health counts `in_flight` restorations admitted (a minute at most)."""
    for _ in range(600):
        if httpx.get(f"{url}/health", timeout=5).json()["in_flight"] == in_flight:
            return
        time.sleep(0.1)
    raise AssertionError(f"/health never counted {in_flight} restorations in flight")


def _long_upload() -> dict:
    """330 x 300 px: twelve tiles at ten steps, a restore that outlasts the client's wait."""
    ramp = np.linspace(0, 255, 300, dtype=np.float64)[None, :, None]
    image = np.broadcast_to(ramp, (330, 300, 3)).astype(np.uint8)
    return {"file": ("long.png", _png(image), "image/png")}


def _freed(url: str, within_s: float) -> float:
    """Seconds until the one queue slot is free again (/health counts nothing in flight)."""
    started = time.perf_counter()
    while time.perf_counter() - started < within_s:
        if httpx.get(f"{url}/health", timeout=5).json()["in_flight"] == 0:
            return time.perf_counter() - started
        time.sleep(0.05)
    raise AssertionError(f"the queue slot was still taken after {within_s} s")


def test_a_client_that_gives_up_has_its_work_dropped(server):
    """The client waits 1 s for a restore that takes at least 10 x STEP_DELAY_S: the server
    notices it has gone, stops the work before its next sampler step and frees the one queue
    slot, well before the whole restore would have ended."""
    before = httpx.get(f"{server}/health").json()["dropped"]["client_gone"]
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server}/restore", params={"steps": 10}, files=_long_upload(), timeout=1.0)
    freed_s = _freed(server, within_s=10 * STEP_DELAY_S)
    assert httpx.get(f"{server}/health").json()["dropped"]["client_gone"] == before + 1
    started = time.perf_counter()
    whole = httpx.post(f"{server}/restore", params={"steps": 10}, files=_long_upload(), timeout=120)
    assert whole.status_code == 200
    assert 1.0 + freed_s < time.perf_counter() - started, freed_s


def test_a_request_past_its_time_limit_gets_504_and_its_work_stops(strict_server):
    answer = httpx.post(
        f"{strict_server}/restore", params={"steps": 10}, files=_long_upload(), timeout=120
    )
    assert answer.status_code == 504 and "serve.timeout_s (1 s)" in answer.json()["detail"]
    _freed(strict_server, within_s=10 * STEP_DELAY_S)
    assert httpx.get(f"{strict_server}/health").json()["dropped"] == {
        "client_gone": 0,
        "timeout": 1,
    }


@needs_chromium
def test_the_page_restores_a_dropped_chart_as_the_api_does(trained_project, tmp_path_factory):
    """GET / in headless Chromium (Playwright driving the system's browser): a default chart
    chosen, restored with the adapter and steps picked on the page, shown beside the input, with
    the same bytes as POST /restore returns for the same file; a file that is no image gets a
    sentence on the page; digitized as it is, its overlay shown and its CSV the one digitize()
    reads."""
    from playwright.sync_api import sync_playwright

    project = _models_only(trained_project, tmp_path_factory.mktemp("page") / "project")
    sharp, _, _ = draw_chart(load_params(ROOT / "params.yaml").data.charts, 0)
    chart = project / "chart.png"
    chart.write_bytes(_png(sharp))
    serving = _serve(project, max_steps=10)
    url = next(serving)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(f"{url}/")
            page.wait_for_function("document.getElementById('adapter').options.length === 3")
            assert page.input_value("#adapter") == "hard"  # the default adapter, preselected
            page.set_input_files("#file", str(chart))
            page.select_option("#adapter", "easy")
            page.fill("#steps", "2")
            page.click("#restore")
            page.wait_for_selector("#result:not([hidden])", timeout=120_000)
            shown = bytes(page.evaluate(READ_RESTORED))
            assert page.get_attribute("#download", "download") == "chart-restored.png"
            not_an_image = {"name": "notes.png", "mimeType": "image/png", "buffer": b"plain text"}
            page.set_input_files("#file", files=[not_an_image])
            page.click("#restore")
            page.wait_for_function("document.getElementById('error').textContent !== ''")
            error = page.text_content("#error")
            page.set_input_files("#file", str(chart))
            page.uncheck("#restore-first")
            page.click("#digitize")
            page.wait_for_selector("#digitized:not([hidden])", timeout=120_000)
            table = page.evaluate(READ_CSV)
            overlay_size = page.evaluate(OVERLAY_SIZE)
            browser.close()
        direct = httpx.post(
            f"{url}/restore",
            params={"steps": 2, "adapter": "easy"},
            files={"file": ("chart.png", chart.read_bytes(), "image/png")},
            timeout=120,
        )
    finally:
        serving.close()
    assert Image.open(io.BytesIO(shown)).size == (sharp.shape[1], sharp.shape[0])
    assert shown == direct.content
    assert error.startswith("Not restored: not an image"), error
    assert table == csv_text(digitize(sharp)) and len(table.splitlines()) > 100
    assert overlay_size == [3 * sharp.shape[1], 3 * sharp.shape[0]]


# the digitized chart's CSV and its overlay's size, as the page shows them
READ_CSV = """async () => (await fetch(document.getElementById("csv").href)).text()"""
OVERLAY_SIZE = """() => {
  const overlay = document.getElementById("overlay");
  return [overlay.naturalWidth, overlay.naturalHeight];
}"""

# the restored image's bytes, as the page holds them (a blob: URL)
READ_RESTORED = """async () => {
  const answer = await fetch(document.getElementById("restored").src);
  return Array.from(new Uint8Array(await answer.arrayBuffer()));
}"""
