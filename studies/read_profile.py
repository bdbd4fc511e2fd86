"""Where the one read's seconds go: cProfile of one cold ``rerank_and_compress`` call per read
configuration, a question and 20 HotpotQA fullwiki paragraphs (the inputs of
``studies/read_cost.py``), the MiniLM cache cleared first. Prints the cumulative seconds of the
proxy forward (``capture``) and of MiniLM (``dense_scores``) beside the whole call
(BENCHMARKS §0, "The read curve": the profile behind "MiniLM, not the proxy, is most of it").

    python studies/read_profile.py --threads 2 --read cap-1024 --read docs-768
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from read_cost import READS, queries  # noqa: E402

from ragattn.compress import Compressor  # noqa: E402
from ragattn.embed import shared_embedder  # noqa: E402
from ragattn.lab.timing import runtime_info, runtime_line  # noqa: E402
from ragattn.proxy import load_proxy  # noqa: E402

PARTS = {"proxy forward": "capture", "MiniLM": "dense_scores"}
"""The functions timed: the attention capture forward, and every MiniLM encoding."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--read", action="append", choices=sorted(READS))
    args = parser.parse_args()
    proxy = load_proxy("smollm2-135m", threads=args.threads)
    print(runtime_line(runtime_info(proxy)))
    warm, probe = queries(20, 2, 200)
    for name in args.read or ["cap-1024"]:
        compressor = Compressor(proxy, cascade=READS[name])
        compressor.rerank_and_compress(*warm, ratio=0.2)
        shared_embedder().clear_cache()
        profile = cProfile.Profile()
        profile.enable()
        compressor.rerank_and_compress(*probe, ratio=0.2)
        profile.disable()
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        total = sum(tt for (_, _, fn), (_, _, tt, _, _) in stats.items())
        parts = {
            part: max(
                (ct for (_, _, fn), (_, _, _, ct, _) in stats.items() if fn == func), default=0.0
            )
            for part, func in PARTS.items()
        }
        print(
            f"{name}: call {total:.2f} s; " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
        )


if __name__ == "__main__":
    main()
