"""The examples under pipelines/examples run offline and print what docs/integrations.md shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "pipelines" / "examples"


def run_example(name: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_sdk_example_remote_equals_in_process() -> None:
    out = run_example("sdk_client.py")
    assert out.count("  eiffel  index=1 relevance=") == 3  # in process, Client, AsyncClient
    assert out.rstrip().endswith("remote equals in process: True")


def test_langchain_example_reranks_compresses_and_prompts() -> None:
    out = run_example("langchain_chain.py")
    assert "first stage: ['louvre', 'seine', 'eiffel']" in out
    ranked = out.split("are dropped):\n", 1)[1]
    assert ranked.startswith("  eiffel  relevance=")
    assert "async equals sync: True" in out
    assert "human: 'When was the Eiffel Tower completed?'" in out


def test_llamaindex_example_query_engine() -> None:
    out = run_example("llamaindex_query_engine.py")
    nodes = out.split("together):\n", 1)[1]
    assert nodes.startswith("  eiffel  score=")
    assert "Query: When was the Eiffel Tower completed?" in out
    assert "ragattn_kept_spans" not in out.split("what the LLM read", 1)[1]
