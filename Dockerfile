# ferry in a container: `docker build --build-arg EXTRAS=iceberg,postgres,server -t ferry .`
# The image runs `ferry serve` by default; `ferry worker` and `ferry run JOB` as other commands.

ARG PYTHON_VERSION=3.11

# --- build: the wheel and its dependencies into a virtual environment -------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
# the pip extras to install (see pyproject.toml): sinks, `postgres` for the state store, `server`
ARG EXTRAS=iceberg,postgres,server
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# a C compiler for ferry._arenas (Python's freed arenas kept for reuse; ferry builds without it)
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/ferry
WORKDIR /src
# the dependencies first, in a layer of their own: a change to src/ does not install them again
COPY pyproject.toml setup.py README.md docker/requirements.py ./
RUN python requirements.py "${EXTRAS}" > requirements.txt \
    && /opt/ferry/bin/pip install --requirement requirements.txt
COPY src ./src
RUN /opt/ferry/bin/pip install --no-deps ".[${EXTRAS}]"
# the HEALTHCHECK of every role (serve, run, worker), in the environment the final stage copies
COPY docker/healthcheck.py /opt/ferry/bin/ferry-healthcheck

# --- run: the virtual environment alone, as an unprivileged user --------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm
RUN groupadd --system --gid 10001 ferry \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/ferry --create-home ferry \
    && install -d -o ferry -g ferry /var/lib/ferry/pipelines /var/lib/ferry/warehouse /etc/ferry
COPY --from=build /opt/ferry /opt/ferry
ENV PATH=/opt/ferry/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    FERRY_STATUS_HOST=0.0.0.0
WORKDIR /var/lib/ferry
# numeric, so that a cluster can tell it is not root (runAsNonRoot)
USER 10001:10001
# 8080: the API of `ferry serve` (api.port); 9249: a pipeline's status port (pipeline.status.port)
EXPOSE 8080 9249
# `serve`: its API's /healthz; `run`: the pipeline's status port's /healthz when the job has one;
# `worker`: its process (docker/healthcheck.py; FERRY_HEALTH_URL names another URL to ask)
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/opt/ferry/bin/ferry-healthcheck"]
ENTRYPOINT ["ferry"]
CMD ["serve", "--config", "/etc/ferry/server.yaml"]
