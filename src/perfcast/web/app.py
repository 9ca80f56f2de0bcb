"""The Starlette application of ``perfcast serve``: five pages, their static files, one API.

Framework: Starlette (with uvicorn as the server) - a small, actively maintained ASGI toolkit
with no template engine, ORM or front-end build step to carry; the pages are one static HTML
file plus plain JS/SVG shipped in ``perfcast/web/static`` (nothing loads from the internet).

API: ``GET /api/<command>?<page query>`` answers exactly what ``perfcast <command> ... --json``
prints (``perfcast.web.runner``), with the equivalent command in the ``X-Perfcast-Command``
header; bad input answers 400 with ``{"error", "field", "command"}`` (the CLI's one-line message
and the form field it names). ``GET /api/fields`` describes every page's form;
``GET /api/trace/train?<query>`` is the Chrome-trace JSON ``perfcast train --trace`` writes (the
Train page's pipeline Gantt). A request with an ``X-Perfcast-Progress: <token>`` header records
its search's progress, which ``GET /api/progress/<token>`` answers as ``{"done", "total"}``
(``perfcast.web.progress``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from perfcast.errors import InputError
from perfcast.web.fields import cli_args, page_fields
from perfcast.web.progress import TOKEN, ProgressBoard
from perfcast.web.runner import command_line, run_cli

STATIC_DIR = Path(__file__).parent / "static"
PAGES = ("train", "serve", "deploy", "search", "compare")
COMMANDS_WITH_CALIBRATION = ("train", "infer", "search")


def create_app(calibration: Path | None = None) -> Starlette:
    """The app; ``calibration`` (``perfcast serve --calibration DIR``) is passed to every
    command that takes it."""

    board = ProgressBoard()

    def extra(command: str) -> tuple[str, ...]:
        if calibration is None or command not in COMMANDS_WITH_CALIBRATION:
            return ()
        return ("--calibration", str(calibration))

    def index(request: Request) -> Response:
        return RedirectResponse("/train")

    def page(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    def fields(request: Request) -> Response:
        return JSONResponse({command: [f.to_dict() for f in page]
                             for command, page in page_fields().items()})

    def api(request: Request) -> Response:
        command = request.path_params["command"]
        query = dict(request.query_params)
        try:
            args = cli_args(command, query)
        except InputError as exc:
            field = exc.field if exc.field in query else ""
            return JSONResponse({"error": str(exc), "field": field,
                                 "command": command_line(command, [])}, status_code=400)
        token = request.headers.get("x-perfcast-progress", "")
        if TOKEN.fullmatch(token):
            from perfcast.search.progress_watch import watching

            with watching(board.reporter(token)):
                outcome = run_cli(command, args, extra(command))
        else:
            outcome = run_cli(command, args, extra(command))
        if not outcome.ok:
            return JSONResponse({"error": outcome.message, "field": outcome.field,
                                 "command": outcome.command_line},
                                status_code=400 if outcome.exit_code == 2 else 500)
        return Response(outcome.stdout, media_type="application/json",
                        headers={"X-Perfcast-Command": outcome.command_line})

    def progress(request: Request) -> Response:
        """How far the search of a token has got (404 before its first report)."""
        run = board.get(request.path_params["token"])
        if run is None:
            return JSONResponse({"done": None, "total": None}, status_code=404)
        return JSONResponse(run.to_dict(), headers={"Cache-Control": "no-store"})

    def trace(request: Request) -> Response:
        """The Train page's pipeline Gantt: the Chrome-trace file ``perfcast train --trace``
        writes (to a temporary file of the server's, never a path from the page)."""
        query = dict(request.query_params)
        try:
            args = cli_args("train", query)
        except InputError as exc:
            return JSONResponse({"error": str(exc), "field": exc.field, "command": ""},
                                status_code=400)
        with tempfile.TemporaryDirectory(prefix="perfcast-serve-") as folder:
            path = Path(folder) / "trace.json"
            outcome = run_cli("train", args, (*extra("train"), "--trace", str(path)))
            if not outcome.ok:
                return JSONResponse({"error": outcome.message, "field": outcome.field,
                                     "command": outcome.command_line},
                                    status_code=400 if outcome.exit_code == 2 else 500)
            body = path.read_bytes()
        shown = command_line("train", [*args, *extra("train"), "--trace", "trace.json"])
        return Response(body, media_type="application/json", headers={"X-Perfcast-Command": shown})

    routes = [
        Route("/", index),
        *(Route(f"/{name}", page) for name in PAGES),
        Route("/api/fields", fields),
        Route("/api/trace/train", trace),
        Route("/api/progress/{token}", progress),
        Route("/api/{command}", api),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return Starlette(routes=routes)
