#!/usr/bin/env bash
# Prepare a fresh Debian machine for agentbench's Docker tests: Docker engine + debootstrap installed,
# dockerd running, the sandbox image built offline (no registry needed). Idempotent: every step is
# skipped when already done. Run as root from the repository root:
#
#   sandbox/ci_setup.sh            # uses .venv/bin/python, or $PYTHON
#
# Then: CI=true .venv/bin/pytest   (Docker tests fail instead of skipping if this did not work)
set -euo pipefail

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
DOCKERD_LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"

log() { echo "ci_setup: $*" >&2; }

if ! command -v dockerd >/dev/null || ! command -v docker >/dev/null || ! command -v debootstrap >/dev/null \
    || ! command -v chromium >/dev/null; then
    log "installing docker.io, debootstrap and chromium (the HTML report test renders in headless chromium)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q docker.io debootstrap chromium
fi

if ! docker info >/dev/null 2>&1; then
    log "starting dockerd (log: $DOCKERD_LOG)"
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
        log "dockerd did not come up within 60 s; last log lines:"
        tail -n 20 "$DOCKERD_LOG" >&2 || true
        exit 1
    fi
fi
log "docker engine is up ($(docker version --format '{{.Server.Version}}'))"

# Builds agentbench-sandbox:<hash> unless present; the debootstrap rootfs is cached under
# ${AGENTBENCH_CACHE_DIR:-~/.cache/agentbench}/sandbox, so caching that directory makes this fast.
"$PYTHON" -m agentbench.execution.image --offline
