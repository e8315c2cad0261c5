# gspo-grader production image: the grading service with the web page, on CPU-only torch.
# The role is the command: `serve` (the default) is the web service; any other
# `gspo-grader` subcommand runs in its place (`doctor`, `grade FILE`, later `worker`).
#
#   docker build -t gspo-grader .                 (podman: podman build --format docker)
#   docker run -p 8000:8000 -v gspo-data:/data --cap-drop ALL \
#       --security-opt no-new-privileges --security-opt seccomp=unconfined \
#       --security-opt systempaths=unconfined gspo-grader
#   docker run --rm <the same --security-opt flags> gspo-grader doctor
#
# The sandbox. Each submission runs under bubblewrap in user, pid, network, ipc, uts and
# mount namespaces that the grader, an unprivileged user here, makes itself: no capability
# and no --privileged. Two engine defaults stand in the way. Docker's seccomp profile
# refuses the namespace calls (seccomp=unconfined; podman's default profile allows them),
# and the masked parts of /proc keep the kernel from mounting a fresh /proc in a new user
# namespace (Docker: systempaths=unconfined; podman: --security-opt 'unmask=/proc/*'). On
# AppArmor hosts add apparmor=unconfined. docs/deploy.md says what each flag allows and
# what was measured. Without them no worker starts (GSPO_GRADER_SANDBOX_REQUIRE=bwrap
# below); `-e GSPO_GRADER_SANDBOX_REQUIRE=` accepts grading on resource limits only.
#
# Build arguments, for mirrors and offline builds (scripts/check-image.sh uses them):
#   PYTHON_IMAGE, NODE_IMAGE   the base images (Debian bookworm with Python 3.11; Node 20)
#   TORCH_INDEX_URL            where the CPU build of torch comes from
#   PIP_INDEX_URL              where every other Python package comes from

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm-slim

# ---- the web page: built here, only web/dist reaches the image ---------------------------
FROM ${NODE_IMAGE} AS web
WORKDIR /web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ ./
RUN npm run build

# ---- the exercise folders: the root exercise and exercises/<id>/ when there are any ------
FROM ${PYTHON_IMAGE} AS exercises
WORKDIR /context
COPY . ./
RUN mkdir -p /out/tests \
    && cp -a exercise.toml statement.md experiment.py starter reference /out/ \
    && cp -a tests/tiers /out/tests/ \
    && if [ -d exercises ]; then cp -a exercises /out/; fi

# ---- the service --------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG PIP_INDEX_URL=https://pypi.org/simple

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# bubblewrap builds each submission's sandbox; tini is pid 1 and reaps what bwrap leaves
# behind (an orphaned bwrap becomes pid 1's child, and the grader does not wait for it)
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap tini \
    && apt-get clean && rm -rf /var/lib/apt/lists/*

# A venv works alike on the official image and on a plain Debian base. CPU-only torch
# first, from its own index (the default wheel on PyPI would pull CUDA). Its C++ test
# programs, headers and protoc (about 190 MB) serve C++ builds and tests only, and the
# image has no compiler; `import torch` needs bin/torch_shm_manager, which stays.
RUN python3 -m venv /opt/venv \
    && pip install torch==2.13.0 --index-url "$TORCH_INDEX_URL" \
    && cd /opt/venv/lib/python3.11/site-packages/torch \
    && rm -rf test include lib/*_test.so \
    && find bin -mindepth 1 ! -name torch_shm_manager -delete

COPY pyproject.toml README.md /src/
COPY grader/ /src/grader/
RUN pip install /src && rm -rf /src

# The exercise files are read by path at run time, never installed as packages.
WORKDIR /app
COPY --from=exercises /out/ ./
COPY --from=web /web/dist/ web/dist/

# the grader's own user and group (any gid works: a forked worker maps uid and gid apart)
RUN groupadd --gid 10001 grader \
    && useradd --uid 10001 --gid grader --no-create-home --home-dir /data \
        --shell /usr/sbin/nologin grader \
    && mkdir -p /data && chown grader:grader /data

ENV GSPO_GRADER_EXERCISE_DIR=/app \
    GSPO_GRADER_WEB_DIR=/app/web/dist \
    GSPO_GRADER_DATA_DIR=/data \
    GSPO_GRADER_SANDBOX_REQUIRE=bwrap \
    MPLCONFIGDIR=/tmp/matplotlib

USER grader
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

ENTRYPOINT ["tini", "--", "gspo-grader"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--data-dir", "/data"]
