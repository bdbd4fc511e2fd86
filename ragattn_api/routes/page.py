"""The browser page: ``GET /`` and its assets under ``/static``, plus the built-in example.

The page is plain HTML, CSS and dependency-free JavaScript in ``ragattn_api/static/``; it calls
the public JSON routes (``/v2/rerank``, ``/v1/compress``) like any other client, so it needs no API
of its own.
It is public even when API keys are configured: it holds no data, and its requests carry the key
the user types in. The Content-Security-Policy allows only same-origin scripts, styles and fetches,
so the page cannot silently depend on a CDN.
"""

from __future__ import annotations

from pathlib import Path

from litestar import HttpMethod, MediaType, get, route
from litestar.exceptions import NotFoundException
from litestar.params import FromPath
from litestar.response import File

from ragattn.demo import DOCUMENTS, QUERY

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@get(
    "/",
    media_type=MediaType.HTML,
    include_in_schema=False,
    opt={"public": True},
    sync_to_thread=False,
)
def index() -> File:
    """The page itself."""
    return File(
        STATIC_DIR / "index.html",
        content_disposition_type="inline",
        media_type=MediaType.HTML,
        headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-cache"},
    )


@get("/demo.json", include_in_schema=False, opt={"public": True}, sync_to_thread=False)
def demo_example() -> dict[str, object]:
    """The example of ``ragattn.demo``: one query and its documents in first-stage order."""
    return {
        "query": QUERY,
        "documents": [{"id": d.id, "title": d.title, "text": d.text} for d in DOCUMENTS],
    }


ASSETS: dict[str, Path] = {
    p.name: p for p in sorted(STATIC_DIR.iterdir()) if p.is_file() and p.name != "index.html"
}
"""The files ``/static/<name>`` serves: exactly those in ``ragattn_api/static/``, by name."""

_MEDIA_TYPES = {
    ".js": "text/javascript",
    ".css": "text/css",
    ".png": "image/png",
    ".txt": "text/plain",
}


@route(
    "/static/{file_path:path}",
    http_method=[HttpMethod.GET, HttpMethod.HEAD],
    include_in_schema=False,
    opt={"public": True},
    sync_to_thread=False,
)
def static_asset(file_path: FromPath[str]) -> File:
    """One of :data:`ASSETS`; anything else (other paths, traversal, NUL or control characters)
    is a 404 in the error shape that never repeats the requested path."""
    path = ASSETS.get(file_path.removeprefix("/"))
    if path is None:
        raise NotFoundException()
    return File(
        path,
        content_disposition_type="inline",
        media_type=_MEDIA_TYPES.get(path.suffix, "application/octet-stream"),
        headers={"Cache-Control": "public, max-age=3600"},
    )


PAGE_HANDLERS = [index, demo_example, static_asset]
"""Route handlers to register on the app (see ``api.app.create_app``)."""

__all__ = ["ASSETS", "PAGE_HANDLERS", "STATIC_DIR"]
