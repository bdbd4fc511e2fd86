"""Issue "Hardening, round five" §4: oversized bodies through the shipped load balancer.

Behind ``deploy/nginx.conf`` a dozen 10.5 MB bodies used to take both replicas out of rotation
(nginx let 11 MB through; a replica answered 413 and closed before reading, nginx met a broken pipe
and, at ``max_fails=1``, counted a failure), and then every ordinary request got a 502 for 10 s.
Here the distribution's nginx runs the shipped file, with only the lines that name Docker's
addresses rewritten for loopback (the upstream server line, the resolver, the listen address),
in front of two real replicas on one real Redis: oversized bodies get a JSON 413, bodies a replica
refuses before reading them (a wrong API key) do not cost it its place, and the ordinary requests
sent right after are all 200, served by both replicas.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragattn.settings import Settings

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "deploy" / "nginx.conf"
COMPOSE = REPO / "docker-compose.yml"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
)
KEY = "round-five-key"
DOCS = ["Paris is the capital of France.", "Rome is the capital of Italy.", "Bananas."]
_SIZE = re.compile(r"^(\d+)([kKmMgG]?)$")
_UPSTREAM_SERVER = re.compile(r"^(\s*)server api:8080\b([^;]*);", re.M)


def _bytes(size: str) -> int:
    """An nginx size (``10000000``, ``10m``, ``512k``) in bytes."""
    match = _SIZE.match(size)
    assert match is not None, size
    return int(match.group(1)) * 1024 ** " kmg".index((match.group(2) or " ").lower())


def _directive(conf: str, name: str) -> str:
    found = re.findall(rf"^\s*{name}\s+([^;]+);", conf, re.M)
    assert len(found) == 1, (name, found)
    return str(found[0]).strip()


def render(conf: str, upstreams: list[int], port: int, directory: Path) -> str:
    """The shipped file for loopback: each replica on its own ``server`` line with the shipped
    parameters (``resolve`` dropped: nothing to look up, and nginx before 1.27.3 refuses it),
    no resolver, nginx on ``port``, its temporary files in ``directory``; nothing else changes."""
    match = _UPSTREAM_SERVER.search(conf)
    assert match is not None, "no `server api:8080` line in deploy/nginx.conf"
    indent, params = match.group(1), match.group(2).replace(" resolve", "")
    servers = "\n".join(f"{indent}server 127.0.0.1:{p}{params};" for p in upstreams)
    out = _UPSTREAM_SERVER.sub(lambda _: servers, conf)
    out, resolvers = re.subn(r"^\s*resolver\s[^;]*;\n", "", out, flags=re.M)
    out, listens = re.subn(
        r"^(\s*)listen 8080;", rf"\g<1>listen 127.0.0.1:{port};", out, flags=re.M
    )
    assert (resolvers, listens) == (1, 1)
    temp = "".join(
        f"    {kind}_temp_path {directory / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return out.replace("http {\n", f"http {{\n{temp}    access_log off;\n", 1)


def test_the_shipped_balancer_refuses_bodies_the_service_would_refuse() -> None:
    conf = SHIPPED.read_text()
    assert _bytes(_directive(conf, "client_max_body_size")) <= Settings().max_body_bytes
    # A replica is never out of rotation for an answer it gave (max_fails=0).
    assert "max_fails=0" in _directive(conf, "server api:8080")
    # `resolve` on a server line needs nginx 1.27.3; the compose file must run one that has it.
    image = re.search(r"image:\s*nginx:(\d+)\.(\d+)(?:\.(\d+))?", COMPOSE.read_text())
    assert image is not None
    version = tuple(int(part or 99) for part in image.groups())
    assert version >= (1, 27, 3), version


@pytest.fixture
def nginx(tmp_path: Path, free_port: Callable[[], int]) -> Iterator[Callable[[list[int]], str]]:
    """``nginx([port, port])``: the distribution's nginx running the rendered shipped file in
    front of those replicas (after ``nginx -t`` passes on it); returns its base URL."""
    if NGINX is None:
        pytest.skip("nginx is not installed (apt-get install nginx; scripts/test.sh does)")
    started: list[subprocess.Popen[bytes]] = []

    def start(upstreams: list[int]) -> str:
        port = free_port()
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (tmp_path / kind).mkdir(exist_ok=True)
        conf = tmp_path / "nginx.conf"
        conf.write_text(render(SHIPPED.read_text(), upstreams, port, tmp_path))
        # Workers of a root master run as `nobody`, which cannot write under pytest's tmp_path.
        user = "user root; " if os.geteuid() == 0 else ""
        globals_ = f"daemon off; {user}pid {tmp_path / 'nginx.pid'}; error_log {tmp_path}/e.log;"
        base = [NGINX, "-p", str(tmp_path), "-c", str(conf), "-g", globals_]
        check = subprocess.run([*base, "-t"], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
        log = (tmp_path / "nginx.out").open("wb")
        started.append(subprocess.Popen(base, stdout=log, stderr=log))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert started[-1].poll() is None, (tmp_path / "e.log").read_text()
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.1)

    try:
        yield start
    finally:
        for proc in started:
            proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def _served(replica: Any) -> float:
    """Successful reranks this replica answered (its own metrics)."""
    text = httpx.get(f"{replica.url}/metrics", timeout=30).text
    found = re.search(
        r'^ragattn_requests_total\{[^}]*route="/v2/rerank"[^}]*status="200"[^}]*\} (\S+)$',
        text,
        re.M,
    )
    return float(found.group(1)) if found else 0.0


def _oversized(url: str, size: int, key: str) -> int:
    """POST a JSON body of ``size`` bytes; the status (0: nginx broke the connection)."""
    filler = "x" * (size - 64)
    body = f'{{"query": "q", "documents": ["{filler}"]}}'.encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    try:
        resp = httpx.post(f"{url}/v2/rerank", content=body, headers=headers, timeout=120)
    except httpx.TransportError:
        return 0
    if resp.status_code == 413:
        assert resp.headers["content-type"].startswith("application/json")
        assert resp.json()["error_type"] == "input_too_large"
    return resp.status_code


@pytest.mark.redis
@pytest.mark.slow
def test_oversized_bodies_leave_every_replica_in_rotation(
    spawn_server: Callable[..., Any],
    redis_server: Callable[[], Any],
    nginx: Callable[[list[int]], str],
) -> None:
    redis = redis_server()
    common = {
        "cache_backend": "redis",
        "redis_url": redis.url,
        "api_keys": KEY,
        "trusted_proxies": "127.0.0.1",
    }
    replicas = [spawn_server(name=f"replica-{n}", **common) for n in "ab"]
    url = nginx([r.port for r in replicas])

    # Over the service's 10 MB: refused by nginx itself, in the service's JSON shape.
    assert [_oversized(url, 10_500_000, KEY) for _ in range(12)] == [413] * 12
    # Under it, but refused by a replica before it reads the body (a wrong key): since round six
    # the replica drains the body before it answers, so nginx relays the 401 every time (it used
    # to reset the connection: a 502 in 8 of 12 tries), and the replica stays in rotation.
    refused = [_oversized(url, 6_000_000, "wrong-key") for _ in range(12)]
    assert refused == [401] * 12, refused

    before = [_served(r) for r in replicas]
    ordinary = [
        httpx.post(
            f"{url}/v2/rerank",
            json={"query": f"capital question {i}?", "documents": DOCS},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=120,
        ).status_code
        for i in range(10)
    ]
    assert ordinary == [200] * 10
    after = [_served(r) for r in replicas]
    assert all(b > a for a, b in zip(before, after, strict=True)), (before, after)
