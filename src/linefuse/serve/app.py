"""`linefuse serve`: the restorer behind a small HTTP API (FastAPI, run by uvicorn).

GET / is a page for people (serve/page.html.j2): choose or drop a chart, see the input and the
restored image side by side and wiped one over the other, download the result.
POST /restore takes an image upload (multipart field `file`) and returns the restored PNG;
POST /restore/batch takes several (fields `files`) and returns a zip of PNGs; GET /health and
GET /adapters describe the service. Uploads are size-checked while they are read and
pixel-checked from the header before anything is decoded; the model is loaded once per adapter
and kept, on the runtime eval.runtime picks (inference/runtime.py: the default adapter on ONNX
Runtime where that is faster on this CPU, importing no torch; another adapter on torch).
Restoring runs in a worker thread, one request at a time, so the event loop stays free for
/health; at most `serve.max_queue` requests run or wait, and more get 503 at once.
"""

from __future__ import annotations

import asyncio
import base64
import io
import os
import threading
import time
import zipfile
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import jinja2
import numpy as np
from fastapi import APIRouter, Depends, FastAPI, File, HTTPException, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, Response
from PIL import Image, UnidentifiedImageError
from starlette.concurrency import run_in_threadpool

from linefuse.data.images import to_rgb
from linefuse.hardware import choose_device
from linefuse.inference.restorer import Restorer
from linefuse.serve.settings import restore_steps, serve_settings

if TYPE_CHECKING:
    from linefuse.params.full import Params

FORM_OVERHEAD = 1 << 16  # multipart boundaries and headers around the file
RETRY_AFTER_S = 5  # what a refused client is told to wait
PAGE = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
).get_template("page.html.j2")


class RestoreService:
    """What the routes share: the adapters on disk and their restorers (each loaded once and
    kept), the lock that runs one restoration at a time, the queue's admission, and the count
    of requests whose work was dropped."""

    def __init__(self, params: Params, adapters_dir: Path, device: str):
        self.params, self.settings = params, serve_settings(params)
        self.adapters_dir, self.device = adapters_dir, device
        self.max_bytes = int(self.settings.max_upload_mb * 1024 * 1024)
        self.too_large = (
            f"upload larger than serve.max_upload_mb ({self.settings.max_upload_mb:g} MB)"
        )
        self.default_adapter = params.train.restoring_level()
        self.restorers: dict[str, Restorer] = {}
        self.lock = threading.Lock()  # one restoration at a time: each runtime uses every core
        # requests running or waiting for the lock
        self.admitted = threading.BoundedSemaphore(self.settings.max_queue)
        self.in_flight = 0  # changed on the event loop only
        self.dropped = {
            "client_gone": 0,
            "timeout": 0,
        }  # requests whose work was stopped, by reason

    def adapters(self) -> list[str]:
        """The adapter folders under adapters_dir, by name."""
        return sorted(
            p.name for p in self.adapters_dir.glob("*") if (p / "adapter_config.json").is_file()
        )

    def restorer_for(self, name: str) -> Restorer:
        """Adapter `name`'s restorer, loaded on first use; 422 for an adapter that is not there."""
        if name not in self.restorers:
            if name not in self.adapters():
                raise HTTPException(422, f"unknown adapter {name!r}; GET /adapters lists them")
            self.restorers[name] = Restorer.from_params(
                self.params, self.adapters_dir / name, self.device
            )
        return self.restorers[name]

    def health(self) -> dict:
        return {
            "status": "ok",
            "default_adapter": self.default_adapter,
            "loaded": sorted(self.restorers),
            "device": self.device,
            # each loaded adapter's runtime (onnx or torch), as eval.runtime chose it
            "runtime": {name: r.runtime.value for name, r in sorted(self.restorers.items())},
            "dropped": dict(self.dropped),
            "in_flight": self.in_flight,  # restorations admitted and not yet finished
        }

    async def refuse_large_bodies(self, request: Request, call_next):
        """Middleware: 413 from the declared length, before the body is read at all."""
        declared = request.headers.get("content-length", "")
        files = self.settings.max_batch if request.url.path == "/restore/batch" else 1
        if declared.isdigit() and int(declared) > files * (self.max_bytes + FORM_OVERHEAD):
            return JSONResponse({"detail": self.too_large}, status_code=413)
        return await call_next(request)

    async def read_upload(self, file: UploadFile) -> bytes:
        """The upload's bytes, read no further than serve.max_upload_mb (413 past it)."""
        if file.size is not None and file.size > self.max_bytes:
            raise HTTPException(413, self.too_large)
        data = await file.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise HTTPException(413, self.too_large)
        if not data:
            raise HTTPException(422, f"{file.filename or 'upload'}: empty; send an image file")
        return data

    async def run_admitted(self, request: Request, work: Callable):
        """`work(should_stop)`'s result, one queue slot per request, held until the worker is
        done with it; the work runs off the event loop, which meanwhile answers /health and
        watches the request: past serve.timeout_s, or once the client has gone, the work is told
        to stop (before its next sampler step) and the request ends."""
        if not self.admitted.acquire(blocking=False):
            raise HTTPException(
                503,
                f"busy: serve.max_queue ({self.settings.max_queue}) restorations running or "
                f"waiting",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        self.in_flight += 1
        stop = threading.Event()
        task = asyncio.ensure_future(run_in_threadpool(work, stop.is_set))
        task.add_done_callback(self._finished)
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            done, _ = await asyncio.wait(
                {task, gone}, timeout=self.settings.timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            gone.cancel()
        if task not in done:
            stop.set()
            raise self._dropped(client_gone=gone in done)
        return task.result()

    def _dropped(self, client_gone: bool) -> HTTPException:
        """Counts a request whose work was stopped; the error that ends it (499 or 504)."""
        if client_gone:
            self.dropped["client_gone"] += 1
            return HTTPException(499, "client closed the request; the work was dropped")
        self.dropped["timeout"] += 1
        return HTTPException(
            504,
            f"took longer than serve.timeout_s ({self.settings.timeout_s:g} s); ask for fewer "
            f"steps or send a smaller image",
        )

    def _finished(self, task: asyncio.Future) -> None:
        """The worker is done (restored, failed or stopped): its queue slot is free."""
        self.admitted.release()
        self.in_flight -= 1
        if not task.cancelled():
            task.exception()  # retrieved: a dropped request's SamplingCancelled is not logged

    def restored(
        self, uploads: list, adapter: str | None, steps: int, seed: int, should_stop=None
    ) -> list[tuple]:
        """Every upload decoded (a bad one fails the request, named) before any is restored;
        (the image as the model got it, straightened, and as `adapter`'s model restored it) for
        each, uint8 RGB; (None, the image as sent) where adapter is None."""
        images = []
        for name, data in uploads:
            try:
                images.append(_decode_limited(data, self.settings.max_pixels))
            except HTTPException as error:
                detail = error.detail if len(uploads) == 1 else f"{name}: {error.detail}"
                raise HTTPException(error.status_code, detail) from None
        if adapter is None:
            return [(None, image) for image in images]
        delay = float(os.environ.get(STEP_DELAY_ENV, "0"))
        if delay:  # tests: every sampler step lasts at least this long, on any machine
            should_stop = _paced(should_stop, delay)
        with self.lock:  # loading an adapter's model also happens here, once
            restorer = self.restorer_for(adapter)
            return [restorer.restore_pair(image, steps, seed, should_stop) for image in images]

    def restored_pngs(
        self, uploads: list, adapter: str, steps: int, seed: int, should_stop=None
    ) -> list[bytes]:
        pairs = self.restored(uploads, adapter, steps, seed, should_stop)
        return [_png(restored) for _, restored in pairs]

    def digitized(
        self, upload: tuple, adapter: str | None, steps: int, seed: int, should_stop=None
    ) -> tuple:
        """(the image digitized, restored first unless adapter is None, and what was read);
        422 naming why for a chart that cannot be read."""
        from linefuse.digitize.chart import Unreadable, digitize

        ((restored_from, image),) = self.restored([upload], adapter, steps, seed, should_stop)
        try:
            return image, digitize(image, restored_from)
        except Unreadable as why:
            raise HTTPException(422, str(why)) from None


# For tests: seconds each sampler step waits first, so that a restore outlasts what the tests
# do meanwhile (probes, a client giving up, a time limit) however fast the machine is.
STEP_DELAY_ENV = "LINEFUSE_SERVE_STEP_DELAY_S"


def _paced(should_stop, delay: float):
    def paced() -> bool:
        time.sleep(delay)
        return bool(should_stop and should_stop())

    return paced


def create_app(params: Params, adapters_dir: Path, device: str | None = None) -> FastAPI:
    """The app over the adapters in `adapters_dir`, on `device` (None: compute.device); the
    last curriculum level's adapter, the default, is loaded before the first request."""
    service = RestoreService(
        params, adapters_dir, device or choose_device(params.compute.device).value
    )
    app = FastAPI(title="LineFuse", description=__doc__.splitlines()[0])
    if service.default_adapter in service.adapters():
        restorer = service.restorer_for(service.default_adapter)
        if params.tiles.tile == "auto":  # timed now (or read from the cache), not in a request
            restorer.tile_costs.measured()
    app.state.service = service
    app.middleware("http")(service.refuse_large_bodies)
    app.include_router(info_routes)
    app.include_router(restore_routes(params))
    return app


async def _service(request: Request) -> RestoreService:
    return request.app.state.service


# the app's RestoreService, as a route parameter (an async dependency: a plain def one would
# take a worker thread for every request, /health's included, while a restoration holds one)
Service = Annotated[RestoreService, Depends(_service)]


info_routes = APIRouter()


@info_routes.get("/health")
def health(service: Service) -> dict:
    return service.health()


@info_routes.get("/adapters")
def list_adapters(service: Service) -> dict:
    return {"adapters": service.adapters(), "default": service.default_adapter}


def restore_routes(params: Params) -> APIRouter:
    """POST /restore and POST /restore/batch; their query defaults and limits come from params
    (FastAPI reads them from the signatures, so the routes are made per app)."""
    settings, default_adapter = serve_settings(params), params.train.restoring_level()
    steps_unless_told = restore_steps(params)
    router = APIRouter()
    page = PAGE.render(max_steps=settings.max_steps, default_steps=steps_unless_told)

    @router.get("/", response_class=HTMLResponse)
    def restore_page() -> str:
        """A page for people: choose or drop a chart, see it restored beside the input."""
        return page

    @router.post(
        "/restore",
        response_class=Response,
        responses={200: {"content": {"image/png": {}}}, 413: {}, 422: {}},
    )
    async def restore(
        request: Request,
        service: Service,
        file: UploadFile = File(..., description="the blurred image"),
        steps: int = Query(steps_unless_told, ge=1, le=settings.max_steps),
        seed: int = Query(0, ge=0),
        adapter: str = Query(default_adapter),
    ) -> Response:
        uploads = [(file.filename or "image", await service.read_upload(file))]
        work = partial(service.restored_pngs, uploads, adapter, steps, seed)
        pngs = await service.run_admitted(request, work)
        return Response(pngs[0], media_type="image/png")

    @router.post(
        "/restore/batch",
        response_class=Response,
        responses={200: {"content": {"application/zip": {}}}, 413: {}, 422: {}, 503: {}},
    )
    async def restore_batch(
        request: Request,
        service: Service,
        files: list[UploadFile] = File(..., description="the blurred images"),
        steps: int = Query(steps_unless_told, ge=1, le=settings.max_steps),
        seed: int = Query(0, ge=0),
        adapter: str = Query(default_adapter),
    ) -> Response:
        """Several images in one request, restored in order: a zip of NNN-NAME.png."""
        if len(files) > settings.max_batch:
            raise HTTPException(413, f"{len(files)} files; serve.max_batch is {settings.max_batch}")
        uploads = [(file.filename or "image", await service.read_upload(file)) for file in files]
        work = partial(service.restored_pngs, uploads, adapter, steps, seed)
        pngs = await service.run_admitted(request, work)
        names = [f"{i:03d}-{Path(name).stem}.png" for i, (name, _) in enumerate(uploads)]
        return Response(_zip(zip(names, pngs, strict=True)), media_type="application/zip")

    @router.post(
        "/digitize",
        response_class=Response,
        responses={200: {"content": {"text/csv": {}, "application/json": {}}}, 413: {}, 422: {}},
    )
    async def digitize_chart(
        request: Request,
        service: Service,
        file: UploadFile = File(..., description="the chart image"),
        restore: bool = Query(True, description="restore it first (false: a sharp chart)"),
        format: Literal["csv", "json"] = Query("csv"),
        steps: int = Query(steps_unless_told, ge=1, le=settings.max_steps),
        seed: int = Query(0, ge=0),
        adapter: str = Query(default_adapter),
    ) -> Response:
        """The chart's series in data units as CSV (series, x, y), read from its pixels alone
        (linefuse digitize); format=json: the CSV, the axes found and the overlay PNG (base64)."""
        from linefuse.digitize.outputs import axes_json, csv_text, overlay  # scipy: not at start

        upload = (file.filename or "image", await service.read_upload(file))
        work = partial(service.digitized, upload, adapter if restore else None, steps, seed)
        image, digitized = await service.run_admitted(request, work)
        table = csv_text(digitized)
        if format == "csv":
            return Response(table, media_type="text/csv")
        picture = base64.b64encode(_png(np.asarray(overlay(image, digitized)))).decode()
        body = {"csv": table, "axes": axes_json(digitized), "overlay_png": picture}
        return JSONResponse(body)

    return router


async def _disconnected(request: Request) -> None:
    """Returns once the client has closed the connection. The body is read by then, so the
    server's next message is the disconnect (Starlette's is_disconnected() only polls, and
    misses it: Kludex/starlette discussion #2215)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _zip(named: Iterable[tuple[str, bytes]]) -> bytes:
    """A zip of the PNGs as stored (PNG is compressed already), with a fixed timestamp."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in named:
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def _png(image) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    return buffer.getvalue()


def _decode_limited(data: bytes, max_pixels: int):
    """Pixels from the header are checked before anything is decoded."""
    try:
        image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise HTTPException(422, "not an image: send a PNG, JPEG, TIFF or WebP file") from None
    width, height = image.size
    if width * height > max_pixels:
        raise HTTPException(413, f"{width}x{height} image exceeds serve.max_pixels={max_pixels}")
    try:
        image.load()
    except (OSError, SyntaxError, ValueError) as error:
        raise HTTPException(422, f"corrupt image: {error}") from None
    return to_rgb(image)
