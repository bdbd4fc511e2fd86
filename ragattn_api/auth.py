"""Bearer API keys (deny by default) and the client identity the rate limit counts, as app guards.

Every route needs a key when keys are configured, except handlers marked ``opt={"public": True}``
(``/health``, ``/ready``, ``/metrics``) and the OpenAPI pages under ``/schema``. A test walks every
registered route to keep it that way.

The rate limit (:mod:`ragattn_api.rate_limit`) counts per :func:`client_id`. With API keys
configured the client is the key that authenticated the request, named by its digest (the key
guard runs first, so an unknown token is a 401 and never gets a bucket of its own); the digest is
the same on every replica whatever the order of ``RAGATTN_API_KEYS``, and no secret reaches Redis.
Without keys it is the peer address, and a bearer token a client makes up is ignored. The peer
address is the TCP peer unless the connection comes from one of ``RAGATTN_TRUSTED_PROXIES``, whose
``X-Forwarded-For`` the server then applies (uvicorn's proxy-headers support, configured in
:mod:`ragattn_api.server`); forwarded headers from anyone else are ignored.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from ragattn_api.errors import UnauthorizedError
from ragattn_api.tenancy import key_partition, set_partition

PUBLIC_PREFIXES = ("/schema",)
_CLIENT_STATE = "ragattn.client"

# Guards are async on purpose: Litestar runs a sync guard in a worker thread, which cost about a
# millisecond per request (a thread hand-off) for a check that never blocks.


def is_public(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> bool:
    return bool(handler.opt.get("public")) or connection.scope["path"].startswith(PUBLIC_PREFIXES)


def bearer_token(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def client_id(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """Who a request counts against: ``key-<digest>`` of the API key that authenticated it, else
    ``addr:<peer address>`` (the trusted proxy's ``X-Forwarded-For`` already applied)."""
    client = connection.scope.get("state", {}).get(_CLIENT_STATE)
    if client is not None:
        return str(client)
    return "addr:" + (connection.client.host if connection.client else "unknown")


class ApiKeyGuard:
    """Accepts a request whose Bearer token equals one of ``keys`` (constant-time compare)."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._keys = tuple(k.encode() for k in keys)
        self._partitions = tuple(key_partition(k) for k in keys)

    async def __call__(
        self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
        if not self._keys or is_public(connection, handler):
            return
        token = bearer_token(connection)
        if token is None:
            raise UnauthorizedError("missing API key: send 'Authorization: Bearer <key>'")
        candidate = token.encode()
        # Compare against every key so timing does not reveal which one matched.
        matched = -1
        for position, key in enumerate(self._keys):
            if hmac.compare_digest(candidate, key):
                matched = position
        if matched < 0:
            raise UnauthorizedError("invalid API key")
        # The rate limiter keys on the key's digest, never on the raw token.
        connection.scope.setdefault("state", {})[_CLIENT_STATE] = self._partitions[matched]
        set_partition(self._partitions[matched])  # the cache partition (RAGATTN_CACHE_SCOPE=key)


__all__ = ["ApiKeyGuard", "bearer_token", "client_id", "is_public"]
