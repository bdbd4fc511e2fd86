"""``ragattn.fingerprint``: a new weight, asset or method name is a new identity."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ragattn.assets import use_models_dir
from ragattn.fingerprint import model_fingerprint, weights_digest


def test_the_fingerprint_names_weights_methods_and_assets(proxy: Any, tmp_path: Path) -> None:
    base = model_fingerprint(proxy, "fused", "focal")
    assert base.startswith(f"{proxy.name}@") and len(base.split("@")[1]) == 24
    assert model_fingerprint(proxy, "fused", "focal") == base
    assert model_fingerprint(proxy, "icr", "focal") != base
    # A user's own assets (RAGATTN_MODELS_DIR, applied by the edges) are part of it, byte for byte.
    own = tmp_path / "models" / "smollm2-135m"
    own.mkdir(parents=True)
    (own / "sentinel.npz").write_bytes(b"one")
    use_models_dir(tmp_path / "models")
    try:
        with_assets = model_fingerprint(proxy, "fused", "focal")
        assert with_assets != base
        (own / "sentinel.npz").write_bytes(b"two")
        assert model_fingerprint(proxy, "fused", "focal") != with_assets
    finally:
        use_models_dir(None)
    assert model_fingerprint(proxy, "fused", "focal") == base


def test_the_fingerprint_names_the_dtype(proxy: Any) -> None:
    # dtype="auto" is bf16 on some CPUs and fp32 on others: replicas sharing one Redis must never
    # serve each other's answers, even for weights that hash alike.
    bf16 = replace(proxy, dtype=torch.bfloat16)  # the same model object: the same weights digest
    assert model_fingerprint(bf16, "sentinel") != model_fingerprint(proxy, "sentinel")


def test_the_weights_digest_sees_one_changed_value() -> None:
    model = torch.nn.Linear(3, 2)
    before = weights_digest(model)
    assert weights_digest(model) == before  # remembered
    other = torch.nn.Linear(3, 2)
    with torch.no_grad():
        other.weight.copy_(model.weight)
        other.bias.copy_(model.bias)
    assert weights_digest(other) == before
    with torch.no_grad():
        other.bias[0] += 1e-6
    fresh = torch.nn.Linear(3, 2)
    with torch.no_grad():
        fresh.weight.copy_(other.weight)
        fresh.bias.copy_(other.bias)
    assert weights_digest(fresh) != before


def test_the_fingerprint_hashes_scoring_code_and_assets_not_the_lab() -> None:
    from ragattn.fingerprint import result_files

    names = [name for name, _ in result_files()]
    assert "ragattn/rerank/icr.py" in names and "ragattn/compress/probe.py" in names
    assert any(name.endswith("smollm2-135m/sentinel.npz") for name in names)
    left_out = ("ragattn/lab/", "ragattn/cli/", "ragattn/batch/", "ragattn/integrations/")
    assert not [name for name in names if name.startswith(left_out)]
    assert "ragattn/client.py" not in names
