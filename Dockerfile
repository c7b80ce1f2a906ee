# fabricmon's image: one image for every service (`fabricmon migrate | collect | analyze | api | sim`).
#
# Stage 1 builds fabricmon's wheel (it carries the SQL migrations as store/migrations_sql and the
# collector's C speedups, compiled there with gcc) and
# installs it with its dependencies (binary wheels) into a venv; stage 2 is python-slim plus that
# venv and nothing else: no compiler, no build tools, no PostgreSQL server (the database is the
# timescaledb service), running as an unprivileged user. Plain COPY/RUN only, so the legacy
# builder of docker-compose v1 builds it as well as BuildKit does.
#
#   docker build -t fabricmon:0.1.0 .
#   docker run --rm fabricmon:0.1.0 fabricmon --help

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# .dockerignore keeps tests, docs, deploy/ (and its secrets), .git and the venv out of the context.
# gcc for collector/_speedups.c and store/_copy_binary.c (hatch_build.py); the runtime stage gets
# only the built modules.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY . .
# A venv without pip of its own, filled by the base image's pip: the runtime stage copies just it.
# The last two steps fail the build if the wheel lost its migrations (pyproject's force-include)
# or its C extensions.
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv --without-pip /opt/fabricmon \
 && pip --python /opt/fabricmon/bin/python install /wheels/fabricmon-*.whl \
 && /opt/fabricmon/bin/python -c "from store.migrate import discover; discover() or exit('no migrations in the wheel')" \
 && /opt/fabricmon/bin/python -c "from collector import speedups as s; s.fast_values or exit(s.unavailable)" \
 && /opt/fabricmon/bin/python -c "from store import copy_binary as c; c.unavailable and exit(c.unavailable)"

FROM ${PYTHON_IMAGE} AS runtime
ENV PATH=/opt/fabricmon/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    FABRICMON_DATA_DIR=/var/lib/fabricmon
RUN groupadd --system --gid 10001 fabricmon \
 && useradd --system --uid 10001 --gid fabricmon --home-dir /var/lib/fabricmon --no-create-home \
        --shell /usr/sbin/nologin fabricmon \
 && install -d -o fabricmon -g fabricmon -m 0750 /var/lib/fabricmon /var/lib/fabricmon/spool \
 && install -d -m 0755 /etc/fabricmon
COPY --from=build /opt/fabricmon /opt/fabricmon
USER 10001:10001
WORKDIR /var/lib/fabricmon
# The API (fabricmon api), the collector's /metrics (fabricmon collect --metrics-listen), and the
# simulator's gNMI, SNMP (UDP) and fault-control ports (fabricmon sim).
EXPOSE 8080 9108 9339 1161/udp 9340
CMD ["fabricmon", "--help"]
