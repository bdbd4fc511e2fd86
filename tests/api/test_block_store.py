"""The service's compressor factory: RAGATTN_BLOCK_STORE_MB (passages read once, from one shared
store), RAGATTN_COMPRESS_SELECTION and RAGATTN_COMPRESS_CASCADE."""

from __future__ import annotations

from typing import Any

from ragattn.composition import CompressorFactory, compressor_factory
from ragattn.settings import Settings


def _factory(
    block_store_mb: int = 0, selection: str = "documents", cascade: str = "default"
) -> CompressorFactory:
    return compressor_factory(
        Settings(
            block_store_mb=block_store_mb, compress_selection=selection, compress_cascade=cascade
        )
    )


def test_the_service_factory_shares_one_block_store_between_methods(proxy: Any) -> None:
    build = _factory(16)
    first, second = build(proxy, "sentinel"), build(proxy, None)
    assert first.blocks is not None and second.blocks is not None
    assert first.blocks.store is second.blocks.store
    assert first.blocks.store.max_bytes == 16 << 20
    assert _factory()(proxy, "sentinel").blocks is None  # off by default


def test_the_service_factory_passes_the_selection_on(proxy: Any) -> None:
    """RAGATTN_COMPRESS_SELECTION: ``sentences`` turns the document-aware selection off."""
    assert _factory()(proxy, None).selection == "documents"
    plain = _factory(0, "sentences")(proxy, "sentinel")
    assert plain.selection == "sentences"
    assert plain.document_selection() is None


def test_the_service_factory_passes_the_cascade_on(proxy: Any) -> None:
    """RAGATTN_COMPRESS_CASCADE: the library's default, off, or KEEP:SCORER."""
    from ragattn.compress import DEFAULT_CASCADE, Cascade

    assert _factory()(proxy, None).cascade == DEFAULT_CASCADE
    assert _factory(0, "documents", "off")(proxy, None).cascade is None
    made = _factory(0, "documents", "0.6:bm25")(proxy, "sentinel")
    assert made.cascade == Cascade(keep=0.6, scorer="bm25")
    # a method without attention has no forward to cut
    assert _factory()(proxy, "lexical").cascade is None
