# syntax=docker/dockerfile:1
# gspo-grader production image: the grading service with the web page, on CPU-only torch.
#
#   docker build -t gspo-grader .
#   docker run -p 8000:8000 -v gspo-data:/data \
#       --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       --security-opt systempaths=unconfined gspo-grader
#
# Isolation inside Docker. Each submission runs in a bubblewrap (bwrap) sandbox: its own user,
# pid, network, ipc and uts namespaces, a read-only view of the system and the interpreter, a
# private /tmp, no network, no view of /app/reference, /app/tests or /data. Debian's bwrap is
# not setuid, so it needs *unprivileged user namespaces*, which Docker's defaults block in two
# places: the default seccomp profile refuses clone/unshare with namespace flags, and on
# AppArmor hosts the docker-default profile refuses mounts, and Docker's masked /proc paths
# make the kernel refuse a fresh /proc in a user namespace. Allow them with the three
# --security-opt flags above (or a seccomp profile that permits CLONE_NEWUSER), and make sure
# the host kernel permits them (kernel.unprivileged_userns_clone=1 on Debian;
# kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 24.04). --privileged is NOT needed
# and should not be used. Without user namespaces the grader falls back to resource limits
# only and says so in `gspo-grader doctor` and in every report's `isolation`
# field; set GSPO_GRADER_SANDBOX_REQUIRE=bwrap to refuse to start instead.

# ---- stage 1: build the web page ---------------------------------------------------------
FROM node:20-bookworm-slim AS web
WORKDIR /web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ ./
RUN npm run build

# ---- stage 2: the service ----------------------------------------------------------------
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

# CPU-only torch first, from PyTorch's own index (the default wheel would pull CUDA).
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

WORKDIR /app
COPY pyproject.toml README.md ./
COPY grader/ grader/
RUN pip install .

# The exercise files are read by path at run time, never installed as packages.
COPY reference/ reference/
COPY starter/ starter/
COPY tests/tiers/ tests/tiers/
COPY exercise.toml experiment.py statement.md ./
COPY --from=web /web/dist/ web/dist/

RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin grader \
    && mkdir -p /data && chown grader:grader /data

ENV GSPO_GRADER_EXERCISE_DIR=/app \
    GSPO_GRADER_WEB_DIR=/app/web/dist \
    GSPO_GRADER_DATA_DIR=/data \
    MPLCONFIGDIR=/tmp/matplotlib

USER grader
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

ENTRYPOINT ["gspo-grader", "serve", "--host", "0.0.0.0", "--port", "8000", "--data-dir", "/data"]
