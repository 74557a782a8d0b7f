# syntax=docker/dockerfile:1
# Hubbub: one image for `hubbub gateway` (the default), `hubbub worker` and `hubbub migrate`.
#
#   docker build -t hubbub:0.1.0 .
#   docker run --rm -p 127.0.0.1:8080:8080 -e HUBBUB_WEBCHAT=public \
#     -e HUBBUB_MODEL=openai/gpt-4o-mini -e OPENAI_API_KEY=sk-... \
#     hubbub:0.1.0 up          # everything in one container on embedded SQLite (one machine only)
#
# Through Docker's port mapping the browser is not a loopback client of the container, so
# the web chat's default mode (`local`) would hide it: `public` gives each browser its own
# conversations (see README, "Web chat").
#
# The migrations (alembic/, alembic.ini) are read from the source tree, so the source stays
# in /app and Hubbub is installed from it in editable mode.
FROM python:3.11-slim

# litellm and tiktoken never reach the network (bundled cost map and tokenizer files), and in
# a container the gateway (and a worker's /metrics) must listen on every interface.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    LITELLM_OFFLINE_MODE=true \
    HUBBUB_HOST=0.0.0.0 \
    HUBBUB_PORT=8080 \
    HUBBUB_HOME=/var/lib/hubbub

RUN groupadd --system --gid 10001 hubbub \
    && useradd --system --uid 10001 --gid hubbub --home-dir /var/lib/hubbub \
       --shell /usr/sbin/nologin hubbub \
    && install -d -o hubbub -g hubbub -m 0750 /var/lib/hubbub

WORKDIR /app

# Dependencies first, from the pins in pyproject.toml: this layer is rebuilt only when they change.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
       > /tmp/requirements.txt \
    && pip install --requirement /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY . .
RUN pip install --no-deps --editable . \
    && python -m compileall -q /app/agent_core /app/adapters /app/workers /app/gateway /app/alembic

USER 10001:10001
EXPOSE 8080 9108

# The gateway answers /healthz; a worker container has no gateway, so its /metrics counts.
# (Shell form on purpose: the fallback needs `||`.)
# hadolint ignore=DL3025
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import os, urllib.request as r; r.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('HUBBUB_PORT', '8080'), timeout=4)" 2>/dev/null \
     || python -c "import os, urllib.request as r; r.urlopen('http://127.0.0.1:%s/metrics' % os.environ.get('HUBBUB_WORKER_METRICS_PORT', '9108'), timeout=4)"

ENTRYPOINT ["hubbub"]
CMD ["gateway"]
