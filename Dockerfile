# One image for every role; the command chooses it:
#   fedstats center serve        (settings: FEDSTATS_CENTER_CONFIG + FEDSTATS_CENTER_*)
#   fedstats coordinator serve   (settings: FEDSTATS_COORDINATOR_CONFIG + FEDSTATS_COORDINATOR_*)
#   fedstats synth-data | study run | health | ...
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/fedstats
COPY pyproject.toml README.md requirements.lock ./
COPY shared/ shared/
COPY center_agent/ center_agent/
COPY coordinator/ coordinator/
COPY fedstats_cli/ fedstats_cli/
COPY fedstats_service/ fedstats_service/
COPY fedstats_client/ fedstats_client/

# Installed as the README installs it: a venv and an editable install at the versions the suite
# passed with (requirements.lock; the services need no dev tools; `--build-arg EXTRAS='[dev]'`
# gives the README's command exactly).
ARG EXTRAS=""
RUN python3 -m venv .venv && .venv/bin/pip install -q -c requirements.lock -e ".${EXTRAS}"
ENV PATH=/opt/fedstats/.venv/bin:$PATH
# The binning core's compiled walk (shared/_walk.py, Numba) caches its machine code on disk; the
# install is read-only to the service user, so the cache lives in /tmp (compiled once per container).
ENV NUMBA_CACHE_DIR=/tmp/fedstats-numba

# Not root. The volume mount points belong to the service user, so named volumes do too.
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin fedstats \
    && mkdir -p /srv/data /var/lib/fedstats /etc/fedstats/peers \
    && chown fedstats /srv/data /var/lib/fedstats /etc/fedstats/peers
USER fedstats

EXPOSE 8700 8800
ENTRYPOINT ["fedstats"]
CMD ["--help"]
