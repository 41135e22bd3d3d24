# txn-exporter sidecar image: the exporter only (no Spark, no JVM, no dev tools), non-root,
# runs with a read-only root filesystem. Build: docker build -t txn-exporter .
# Pin the base by digest in your registry mirror for reproducible builds.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/image.txt ./requirements/
COPY exporter ./exporter
# The wheel a user installs is built, then that file installed: the image carries what the wheel
# carries (tests/test_wheel.py checks its contents), not what the source tree holds. Its
# dependencies first, as requirements/image.txt pins them (CI's versions, `make lock`), each file
# checked against its hash; then the wheel without any.
# tests/deploy/test_dockerfile.py runs these very lines in a fresh venv.
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
    && python -m venv /opt/txn-exporter \
    && /opt/txn-exporter/bin/pip install --no-compile --require-hashes -r requirements/image.txt \
    && /opt/txn-exporter/bin/pip install --no-compile --no-deps /wheels/kafka_txn_exporter-*.whl \
    && /opt/txn-exporter/bin/python -m compileall -q /opt/txn-exporter

FROM ${PYTHON_IMAGE}
RUN useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin txn-exporter
COPY --from=build /opt/txn-exporter /opt/txn-exporter
# Bytecode was compiled at build time: nothing is written at run time (readOnlyRootFilesystem).
ENV PATH=/opt/txn-exporter/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TXN_EXPORTER_LISTEN=0.0.0.0:9464
USER 10001:10001
EXPOSE 9464
# Liveness of the HTTP server; with --web-config-file it speaks TLS and a 401 counts as alive
# (see exporter/probe.py). Orchestrators use their own probes (deploy/).
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 \
    CMD ["python", "-m", "exporter.probe", "/healthz"]
ENTRYPOINT ["txn-exporter"]
CMD ["run"]
