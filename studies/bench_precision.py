"""The compression default's attention path at lower precision, in one run: seconds and fidelity.

Variants of the same proxy, each timed on the 2,152-token context of ``ragattn bench compress``
(the attention block the default probe reads: query-span rows, all layers):

- ``float32``: the weights as loaded (what every committed probe was fitted on);
- ``bfloat16``: weights and activations in bf16 (native kernels on CPUs with AVX-512 BF16 or AMX,
  emulated elsewhere; the table says which);
- ``int8 quantize_dynamic``: ``torch.ao.quantization.quantize_dynamic`` (fbgemm), which is what
  ``load_proxy(quantize="int8")`` does today and which PyTorch deprecates;
- ``int8 torchao dynamic``: torchao's ``Int8DynamicActivationInt8WeightConfig``, the supported
  replacement;
- ``int8 torchao weight-only``: torchao's ``Int8WeightOnlyConfig``.

Fidelity is measured against float32 in the same run:

- ``max |dlog|``: the largest difference of the attention features (log mass, nats);
- ``kept@20%``: the share of float32's kept sentences (the default probe, 20 % of the sentences)
  that the variant keeps too;
- recall: the default probe's supporting-sentence recall at 20 % of tokens (33 % for SQuAD) on the
  first ``--hotpot`` HotpotQA and ``--squad`` SQuAD evaluation questions, the float32-fitted probe
  reading the variant's features (its dtype check is lifted on purpose: this measures whether a
  probe fitted in float32 keeps its ranking on other kernels).

    python studies/bench_precision.py --runs 3 --hotpot 20 --squad 40 --out precision.json
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from ragattn.assets import default_models_dir
from ragattn.compress import DEFAULT_METHOD, probe_path
from ragattn.compress.features import Unit, attention_block, attention_config, lexical_block
from ragattn.compress.probe import Probe
from ragattn.devices import native_cpu_bf16
from ragattn.lab.bench import int8_proxy, with_model
from ragattn.lab.bench_compress import hotpot_context
from ragattn.lab.evaluation import datasets, harness
from ragattn.lab.evaluation.systems import FeatureCache, ProbeSystem
from ragattn.lab.timing import time_runs
from ragattn.proxy import Proxy, load_proxy
from ragattn.sentences import split_sentences


def torchao_proxy(proxy: Proxy, weight_only: bool) -> Proxy:
    """A copy of ``proxy`` with torchao int8 linear layers (dynamic activations, or weights
    only)."""
    from torchao.quantization import (
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        quantize_,
    )

    model = copy.deepcopy(proxy.model)
    config = Int8WeightOnlyConfig() if weight_only else Int8DynamicActivationInt8WeightConfig()
    quantize_(model, config)
    label = "torchao-int8-weight" if weight_only else "torchao-int8"
    return replace(with_model(proxy, model), quantize=label)


def variants(proxy: Proxy) -> list[tuple[str, Proxy]]:
    out = [("float32", proxy)]
    half = with_model(proxy, copy.deepcopy(proxy.model).to(torch.bfloat16), dtype=torch.bfloat16)
    out.append(("bfloat16", half))
    out.append(("int8 quantize_dynamic", replace(int8_proxy(proxy), quantize="int8")))
    try:
        out.append(("int8 torchao dynamic", torchao_proxy(proxy, weight_only=False)))
        out.append(("int8 torchao weight-only", torchao_proxy(proxy, weight_only=True)))
    except ImportError as exc:  # torchao is optional: the table then says so
        print(f"torchao not installed ({exc}); its rows are skipped")
    return out


def recall(probe: Probe, proxy: Proxy, examples, budget: float) -> float:
    dtype = attention_config(proxy, rows="both", layers=None)["dtype"]
    lifted = replace(probe, config={**probe.config, "dtype": dtype})
    cache = FeatureCache(proxy)
    report = harness.evaluate_selection(
        examples, {"p": ProbeSystem(cache, "", probe=lifted)}, (budget,), tokenizer=proxy.tokenizer
    )
    return float(report.rows[0].recall[0] or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--proxy", default="smollm2-135m")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hotpot", type=int, default=20)
    parser.add_argument("--squad", type=int, default=40)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    capability = torch.backends.cpu.get_cpu_capability()
    print(f"cpu capability {capability}; native bf16 {native_cpu_bf16()}", flush=True)
    proxy = load_proxy(args.proxy, dtype="float32", threads=2)  # the reference, on every CPU
    probe = Probe.load(probe_path(default_models_dir(), proxy, DEFAULT_METHOD))
    rows_kind, layers = probe.config.get("rows", "last"), probe.config.get("layers")
    query, docs = hotpot_context(args.data / "hotpotqa", 2000, proxy)
    units = [
        Unit(d, s.start, s.end) for d, doc in enumerate(docs) for s in split_sentences(doc.text)
    ]
    lexical, lexical_names = lexical_block(query, docs, units, dense=True)
    hotpot = datasets.load_hotpot(
        args.data / "hotpotqa/hotpot_dev_distractor_v1.shared.json", args.hotpot
    )
    squad = datasets.load_squad(args.data / "squad-v2/dev-v2.0.shared.json", args.squad)

    def block(p: Proxy) -> tuple[np.ndarray, tuple[str, ...]]:
        matrix, names, _ = attention_block(p, query, docs, units, rows=rows_kind, layers=layers)
        return matrix, names

    def kept(attention: np.ndarray, names: tuple[str, ...]) -> set[int]:
        # the probe's top 20 % of the sentences; the lexical columns are the same for all variants
        scores = probe.predict(names + lexical_names, np.concatenate([attention, lexical], axis=1))
        return set(np.argsort(-scores, kind="stable")[:k].tolist())

    ref, names = block(proxy)
    k = max(1, round(0.2 * len(units)))
    results = []
    for name, variant in variants(proxy):
        timing = time_runs(name, lambda v=variant: block(v), args.runs)
        matrix, _ = block(variant)
        started = time.perf_counter()
        row = {
            "variant": name,
            "median_s": timing.median,
            "runs_s": timing.seconds,
            "max_abs_dlog": float(np.abs(matrix - ref).max()),
            "kept_overlap": len(kept(matrix, names) & kept(ref, names)) / k,
            "hotpot_recall": recall(probe, variant, hotpot, 0.2),
            "squad_recall": recall(probe, variant, squad, 0.33),
            "cpu_capability": capability,
        }
        row["quality_seconds"] = time.perf_counter() - started
        results.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            args.out.write_text(json.dumps(results, indent=2))
    base = results[0]["median_s"]
    print(f"\n{len(units)} sentences, cpu capability {capability}, native bf16 {native_cpu_bf16()}")
    print("| variant | attention block s | speed-up | max abs dlog | kept@20% | HotpotQA | SQuAD |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['variant']} | {r['median_s']:.3f} | {base / r['median_s']:.2f}x "
            f"| {r['max_abs_dlog']:.3g} | {r['kept_overlap']:.2f} "
            f"| {r['hotpot_recall']:.3f} | {r['squad_recall']:.3f} |"
        )


if __name__ == "__main__":
    main()
