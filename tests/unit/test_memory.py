"""Serving allocator settings."""

from __future__ import annotations

import platform

import pytest

from ragattn.memory import tune_malloc


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_tune_malloc_applies_on_glibc() -> None:
    assert tune_malloc() is True
    assert tune_malloc(mmap_threshold=256 * 1024, arena_max=4) is True
