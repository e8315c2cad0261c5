#!/usr/bin/env bash
# Build the production image on this machine and check it from outside the container.
#
#   bash scripts/check-image.sh            build (bases cached), run, check; exit 0 if all hold
#   bash scripts/check-image.sh --fresh    forget the cached bases and wheels first
#   bash scripts/check-image.sh --compose  build, then bring deploy/compose.yaml up with
#                                          podman-compose, check it through the proxy, and
#                                          take it down (instead of the single-container runs)
#
# Public base images and PyTorch's index cannot be reached from this kind of machine, so the
# Dockerfile's build arguments point elsewhere (their defaults stay the official ones):
#   PYTHON_IMAGE, NODE_IMAGE   Debian bookworm roots made here by debootstrap, imported into
#                              podman: Python 3.11 from Debian; Node 20 copied from the host
#                              (Debian's own nodejs is 18, production builds on node:20)
#   TORCH_INDEX_URL, PIP_INDEX_URL
#                              a package index of wheels downloaded here with the host's pip
#                              (the CPU torch wheel comes from its local files), served
#                              on loopback for the build
# Then the image runs twice: with the sandbox flags docs/deploy.md gives (everything must
# pass, bwrap level), and with the engine's defaults (the grader must refuse to start, or
# grade and say it runs on resource limits only: "RLIMITS ONLY"). The texts looked for are
# what grader/sandbox/isolation.py prints (describe(), WEAK_WARNING, CONTAINER_FLAGS_HINT),
# case and all. One line per check; "FAIL" lines say why.
# Needs root (rootful podman); installs podman, runc and debootstrap when they are missing
# (with --compose also podman-compose and the CNI dnsname plugin: the nodes find each other
# by service name).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=localhost/gspo-grader:check
PYTHON_BASE=localhost/gspo-grader-base/python:bookworm
NODE_BASE=localhost/gspo-grader-base/node:bookworm
CACHE=${GSPO_GRADER_IMAGE_CACHE:-/var/cache/gspo-grader-image}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PORT=${GSPO_GRADER_CHECK_PORT:-18080}        # the service under test, on loopback
INDEX_PORT=${GSPO_GRADER_INDEX_PORT:-18079}  # the wheel index; fixed, so layers stay cached
NAME=gspo-grader-check
# the least privilege under which the sandbox reaches the bwrap level (docs/deploy.md):
# unmask /proc (the one grant), no capabilities and no setuid gains (two further restrictions)
SANDBOX_FLAGS=(--security-opt 'unmask=/proc/*' --cap-drop ALL --security-opt no-new-privileges)

# --compose: stand-ins for the official postgres and nginx images, from the python base
POSTGRES_BASE=localhost/gspo-grader-base/postgres:bookworm
PROXY_BASE=localhost/gspo-grader-base/nginx:bookworm
PROJECT=gspo-grader-check  # the compose project: its containers, network and volume
compose_mode=0

failures=0
podman_global=()  # set by engine_quirks
limit_flags=()    # set by engine_quirks
index_pid=""

say() { printf '%s\n' "$*"; }
info() { printf 'info %s\n' "$*"; }
ok() { printf 'ok   %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; failures=$((failures + 1)); }
die() { printf 'check-image: %s\n' "$*" >&2; exit 2; }
pm() { podman "${podman_global[@]}" "$@"; }

# ---- tools ------------------------------------------------------------------------------
install_tools() {
    local missing=()
    local wanted=(podman runc debootstrap)
    [[ $compose_mode -eq 1 ]] &&
        wanted+=(podman-compose golang-github-containernetworking-plugin-dnsname)
    for pkg in "${wanted[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}; run as root or apt-get install -y ${missing[*]}"
    local began=$SECONDS
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}"; } >/var/tmp/gspo-grader-apt.log 2>&1 ||
        die "apt-get install ${missing[*]} failed; see /var/tmp/gspo-grader-apt.log"
    ok "installed ${missing[*]} in $((SECONDS - began)) s"
}

engine_quirks() {
    # crun refuses hybrid cgroups (v1 plus a v2 tree holding a controller), as on this
    # machine; runc accepts them. Rootful podman asks for 1048576 open files and processes,
    # more than a root without CAP_SYS_RESOURCE may set: ask for what the host allows.
    [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] || podman_global=(--runtime runc)
    local files procs
    files=$(ulimit -Hn)
    procs=$(ulimit -Hu)
    [[ $procs == unlimited || $procs -gt $(< /proc/sys/kernel/pid_max) ]] &&
        procs=$(< /proc/sys/kernel/pid_max)
    limit_flags=(--ulimit "nofile=$files:$files" --ulimit "nproc=$procs:$procs")
}

# ---- base images --------------------------------------------------------------------------
recipe_of() {  # what a base is made from; a change makes it again
    printf '%s\n' "$MIRROR" "$@" "$(declare -f make_bases bootstrap in_root python_root node_root)" |
        sha256sum | cut -c1-16
}

base_is_current() {
    local label
    label=$(pm image inspect --format '{{index .Config.Labels "gspo-grader.recipe"}}' "$1" \
        2>/dev/null) || return 1
    [[ $label == "$2" ]]
}

host_node() {
    local node
    node=$(command -v node) || die "Node 20 is needed on the host (the web stage copies it)"
    [[ $("$node" --version) == v20.* ]] || die "the host's node is $("$node" --version), not 20"
    printf '%s\n' "$node"
}

bootstrap() {  # a minimal Debian bookworm root with the security and update suites
    debootstrap --variant=minbase bookworm "$1" "$MIRROR" >"$1.log" 2>&1 ||
        die "debootstrap failed; see $1.log"
    cat >"$1/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb ${MIRROR%/debian}/debian-security bookworm-security main
EOF
    in_root "$1" <<'SH'
apt-get update -qq
apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null
SH
}

in_root() {  # run stdin as a shell script inside the root folder $1 (output: $1.log)
    chroot "$1" /usr/bin/env -i DEBIAN_FRONTEND=noninteractive \
        PATH=/usr/sbin:/usr/bin:/sbin:/bin /bin/sh -eu >>"$1.log" 2>&1 ||
        die "a step in the root $1 failed; see $1.log"
}

python_root() {  # what python:3.11-slim-bookworm offers: python3, venv, pip in a venv
    in_root "$1" <<'SH'
apt-get install -y -qq --no-install-recommends python3 python3.11-venv >/dev/null
apt-get clean
rm -rf /var/lib/apt/lists/*
SH
}

node_root() {  # Node 20 and npm from the host; the host's extra CAs (npm's TLS goes through them)
    local node
    node=$(host_node)
    cp -a "$node" "$1/usr/bin/node"
    mkdir -p "$1/usr/lib/node_modules"
    cp -a "$(dirname "$node")/../lib/node_modules/npm" "$1/usr/lib/node_modules/"
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/bin/npm"
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/bin/npx"
    cp -a /usr/local/share/ca-certificates/. "$1/usr/local/share/ca-certificates/" 2>/dev/null || true
    in_root "$1" <<'SH'
update-ca-certificates >/dev/null
apt-get clean
rm -rf /var/lib/apt/lists/*
SH
}

import_root() {  # root folder, image name, recipe label, extra ENV lines
    local root=$1 image=$2 recipe=$3
    shift 3
    local changes=(--change "LABEL gspo-grader.recipe=$recipe" --change 'CMD ["/bin/bash"]'
        --change 'ENV LANG=C.UTF-8'
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
    for env in "$@"; do changes+=(--change "ENV $env"); done
    tar -C "$root" -c . | pm import --quiet "${changes[@]}" - "$image" >/dev/null
}

make_bases() {
    local python_recipe node_recipe work began=$SECONDS
    python_recipe=$(recipe_of python)
    node_recipe=$(recipe_of node "$("$(host_node)" --version)")
    if base_is_current "$PYTHON_BASE" "$python_recipe" &&
        base_is_current "$NODE_BASE" "$node_recipe"; then
        ok "base images cached ($PYTHON_BASE, $NODE_BASE)"
        return 0
    fi
    work=$(mktemp -d /var/tmp/gspo-grader-base.XXXXXX)
    bootstrap "$work/debian"
    cp -a "$work/debian" "$work/node"
    python_root "$work/debian"
    import_root "$work/debian" "$PYTHON_BASE" "$python_recipe"
    node_root "$work/node"
    import_root "$work/node" "$NODE_BASE" "$node_recipe" \
        NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
    rm -rf "$work"
    ok "base images made by debootstrap in $((SECONDS - began)) s ($PYTHON_BASE, $NODE_BASE)"
}

# ---- stand-ins for the compose file's postgres and nginx images ---------------------------
# Built FROM the debootstrapped python base with Debian's own packages (PostgreSQL 15, nginx
# 1.22), they behave as the official images do where deploy/compose.yaml relies on it: the
# database is created from POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB on the first
# start and pg_isready is on PATH; nginx reads /etc/nginx/conf.d/*.conf in the foreground.
postgres_entrypoint() {
    cat <<'SH'
#!/bin/sh
# the official image's contract, in short: create the database on the first start, as the
# postgres user, from POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB; then run the server
set -eu
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" && chown postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
    exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
user=${POSTGRES_USER:-postgres}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is not set}" >"$pwfile"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses= -k /tmp" --wait start >/dev/null
    db=${POSTGRES_DB:-$user}
    [ "$db" = postgres ] || createdb --host=/tmp --username="$user" "$db"
    pg_ctl --pgdata="$PGDATA" --wait stop >/dev/null
    echo "database $db created in $PGDATA"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -k /tmp "$@"
SH
}

make_compose_bases() {
    local recipe work began=$SECONDS
    recipe=$(printf '%s\n' "$(pm image inspect --format '{{.Id}}' "$PYTHON_BASE")" \
        "$(declare -f make_compose_bases postgres_entrypoint)" | sha256sum | cut -c1-16)
    if base_is_current "$POSTGRES_BASE" "$recipe" && base_is_current "$PROXY_BASE" "$recipe"; then
        ok "compose stand-ins cached ($POSTGRES_BASE, $PROXY_BASE)"
        return 0
    fi
    work=$(mktemp -d /var/tmp/gspo-grader-compose.XXXXXX)
    postgres_entrypoint >"$work/entrypoint.sh"
    chmod 755 "$work/entrypoint.sh"
    cat >"$work/Postgres" <<EOF
FROM $PYTHON_BASE
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql-15 \\
    && apt-get clean && rm -rf /var/lib/apt/lists/* \\
    && mkdir -p /var/lib/postgresql/data && chown postgres:postgres /var/lib/postgresql/data
COPY entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PGDATA=/var/lib/postgresql/data \\
    PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LABEL gspo-grader.recipe=$recipe
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
EOF
    cat >"$work/Proxy" <<EOF
FROM $PYTHON_BASE
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends nginx \\
    && apt-get clean && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default \\
    && ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log
LABEL gspo-grader.recipe=$recipe
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
EOF
    for pair in "Postgres:$POSTGRES_BASE" "Proxy:$PROXY_BASE"; do
        pm build --format docker --network host "${limit_flags[@]}" -f "$work/${pair%%:*}" \
            -t "${pair#*:}" "$work" >>"$CACHE/compose-bases.log" 2>&1 || {
            rm -rf "$work"
            die "building ${pair#*:} failed; see $CACHE/compose-bases.log"
        }
    done
    rm -rf "$work"
    ok "compose stand-ins built in $((SECONDS - began)) s ($POSTGRES_BASE, $PROXY_BASE)"
}

# ---- the Python packages, served on loopback -----------------------------------------------
python311() {
    local python=${PYTHON:-python3}
    "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' ||
        die "$python is not Python 3.11 (the image's); set PYTHON"
    printf '%s\n' "$python"
}

make_wheelhouse() {
    # every runtime dependency and the build backend, as wheels for CPython 3.11 on Linux,
    # laid out as a simple index: simple/<name>/<wheel>
    local python wheels=$CACHE/wheels index=$CACHE/index/simple began=$SECONDS
    python=$(python311)
    mkdir -p "$wheels"
    "$python" - <<'EOF' >"$CACHE/requirements.txt"
import tomllib
data = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(data["project"]["dependencies"] + data["build-system"]["requires"]))
EOF
    "$python" -m pip download --only-binary=:all: --dest "$wheels" \
        -r "$CACHE/requirements.txt" >"$CACHE/pip.log" 2>&1 ||
        die "pip download failed; see $CACHE/pip.log"
    compgen -G "$wheels/torch-2.13.0+cpu-*.whl" >/dev/null ||
        die "no CPU build of torch 2.13.0 among the wheels (pip config: find-links?)"
    rm -rf "$index" && mkdir -p "$index"
    for wheel in "$wheels"/*.whl; do
        local name
        name=$(basename "$wheel" | cut -d- -f1 | tr 'A-Z_.' 'a-z--')
        mkdir -p "$index/$name" && ln -f "$wheel" "$index/$name/"
    done
    ok "wheelhouse: $(find "$wheels" -name '*.whl' | wc -l) wheels for" \
        "$(wc -l <"$CACHE/requirements.txt") requirements in $((SECONDS - began)) s"
}

serve_index() {
    local python log=$CACHE/index.log
    python=$(python311)
    "$python" -u -m http.server --bind 127.0.0.1 --directory "$CACHE/index" "$INDEX_PORT" \
        >"$log" 2>&1 &
    index_pid=$!
    for _ in $(seq 50); do
        curl -sf "http://127.0.0.1:$INDEX_PORT/simple/" >/dev/null && return 0
        kill -0 "$index_pid" 2>/dev/null || break
        sleep 0.1
    done
    die "the package index did not start on port $INDEX_PORT (GSPO_GRADER_INDEX_PORT); see $log"
}

stop_index() { [[ -z $index_pid ]] || kill "$index_pid" 2>/dev/null || true; }

# ---- the image ----------------------------------------------------------------------------
build_image() {
    local began=$SECONDS url
    serve_index
    url=http://127.0.0.1:$INDEX_PORT/simple
    # docker format: the OCI format has no HEALTHCHECK, and podman would drop it
    pm build --format docker --network host "${limit_flags[@]}" \
        --build-arg PYTHON_IMAGE="$PYTHON_BASE" --build-arg NODE_IMAGE="$NODE_BASE" \
        --build-arg TORCH_INDEX_URL="$url" --build-arg PIP_INDEX_URL="$url" \
        -t "$IMAGE" . >"$CACHE/build.log" 2>&1 || {
        stop_index
        tail -20 "$CACHE/build.log"
        die "podman build failed; see $CACHE/build.log"
    }
    stop_index
    ok "image built in $((SECONDS - began)) s ($IMAGE)"
}

# ---- checks from outside the container ------------------------------------------------------
check() {  # description, command...: one line, ok or FAIL, with what the command printed
    local what=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$what: ${out//$'\n'/; }"; else fail "$what: ${out//$'\n'/; }"; fi
}

submit() { "$(python311)" scripts/image_client.py "$@"; }

healthy() {  # container, seconds: /healthz answers 200 (and the container still runs)
    local name=$1 limit=$2 began=$SECONDS answer
    while ((SECONDS - began < limit)); do
        answer=$(curl -s -w ' %{http_code}' "$(url)/healthz" || true)
        [[ $answer == *' 200' ]] && { echo "after $((SECONDS - began)) s: $answer"; return 0; }
        if [[ $(pm inspect --format '{{.State.Status}}' "$name") != running ]]; then
            echo "the container ended: $(pm logs "$name" 2>&1 | tail -1)"
            return 1
        fi
        sleep 2
    done
    echo "no 200 within $limit s; last answer: $answer"
    return 1
}
health_check() {  # the image's own HEALTHCHECK command, run once by the engine
    local test
    test=$(pm inspect --format '{{json .Config.Healthcheck.Test}}' "$1")
    echo "${test:-no HEALTHCHECK in the image}"
    [[ $test == *healthz* ]] && pm healthcheck run "$1"
}

url() { printf 'http://127.0.0.1:%s' "$PORT"; }

start_container() {  # name, then podman run options
    local name=$1
    shift
    remove_container "$name"
    # without systemd, podman says on every start that it cannot time the HEALTHCHECK
    # (health_check runs it on demand): keep that out of the check lines
    pm run -d --name "$name" "${limit_flags[@]}" -p "127.0.0.1:$PORT:8000" "$@" "$IMAGE" \
        >/dev/null 2>>"$CACHE/podman-run.log"
}

# -v: the anonymous volume the image's VOLUME /data gets
remove_container() { pm rm -f -v --ignore "$1" >/dev/null 2>>"$CACHE/podman-run.log" || true; }

remove_containers() {  # one at a time: podman 4.3's `rm -f A B` removes none if B is missing
    for name in "$NAME" "$NAME-defaults" "$NAME-rlimits"; do remove_container "$name"; done
}

non_root() {  # the real and effective uids of the container's processes, as the host sees them
    local top uids
    top=$(pm inspect --format '{{.State.Pid}}' "$1")
    uids=$(ps -e -o pid=,ppid=,ruid=,euid= | awk -v top="$top" '
        { parent[$1] = $2; ids[$1] = $3 "/" $4 }
        END {
            for (pid in parent) {
                for (p = pid; p != "" && p != top && p > 1; p = parent[p]) {}
                if (p == top) print ids[pid]
            }
        }' | sort | uniq -c | awk '{printf "%s x uid %s, ", $1, $2}')
    echo "${uids}real/effective (image USER $(pm image inspect --format '{{.Config.User}}' "$IMAGE"))"
    [[ -n $uids && ! $uids =~ uid\ 0/|/0, ]]
}

doctor_says() {  # container, then each line doctor must print
    local name=$1 text
    shift
    text=$(pm exec "$name" gspo-grader doctor) || return 1
    printf '%s\n' "$(grep -m1 'Sandbox level' <<<"$text")"
    for line in "$@"; do grep -qF -- "$line" <<<"$text" || { echo "missing: $line"; return 1; }; done
}

exercises_match() {  # the catalog inside holds every exercise folder of the checkout
    local want got
    want=$(sed -n 's/^id *= *"\(.*\)"/\1/p' exercise.toml exercises/*/exercise.toml 2>/dev/null |
        sort | tr '\n' ' ')
    got=$(pm exec -i "$1" python - <<'EOF' | sort | tr '\n' ' '
from grader.exercise import catalog
for exercise in catalog().values():
    parts = (exercise.statement, exercise.starter, exercise.reference, exercise.tiers_file,
             exercise.experiment)
    missing = [str(part) for part in parts if not part.is_file()]
    print(exercise.id + (f" (missing {', '.join(missing)})" if missing else ""))
EOF
    )
    printf 'in the checkout: %s; in the image: %s\n' "$want" "$got"
    [[ $want == "$got" ]]
}

orphans_reaped() {  # no zombie whose parent is pid 1: the init reaps what it inherits
    local states
    states=$(pm exec "$1" sh -c 'cat /proc/[0-9]*/stat 2>/dev/null') || return 1
    echo "$(wc -l <<<"$states") processes; zombies: $(awk '$3 == "Z" {printf "%s (parent %s) ", $2, $4}' \
        <<<"$states")"
    [[ -z $(awk '$3 == "Z" && $4 == 1' <<<"$states") ]]
}

stops_cleanly() {  # SIGTERM: the service closes (143 is uvicorn raising SIGTERM again after)
    local began=$SECONDS status closed
    pm stop -t 30 "$1" >/dev/null 2>&1
    status=$(pm inspect --format '{{.State.ExitCode}}' "$1")
    closed=$(pm logs "$1" 2>&1 | grep 'service closed' || true)
    echo "exit status $status after $((SECONDS - began)) s: ${closed:-no "service closed" in the log}"
    [[ ($status -eq 0 || $status -eq 143) && $((SECONDS - began)) -lt 30 && -n $closed ]]
}

refuses_to_start() {  # container, seconds, text: it must exit non-zero, naming the setting
    local name=$1 limit=$2 text=$3 began=$SECONDS state log
    while ((SECONDS - began < limit)); do
        state=$(pm inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$name")
        [[ $state == exited* ]] && break
        sleep 2
    done
    if [[ $state != exited* ]]; then
        echo "still running after $limit s; /healthz: $(curl -s "$(url)/healthz")"
        return 1
    fi
    log=$(pm logs "$name" 2>&1)
    echo "exit status ${state#exited } after $((SECONDS - began)) s: $(tail -1 <<<"$log")"
    [[ ${state#exited } -ne 0 && $log == *GSPO_GRADER_SANDBOX_REQUIRE* ]] || return 1
    [[ $log == *"$text"* ]] || { echo "missing: $text"; return 1; }
}

healthz_names_level() {  # /healthz's isolation field, once the service has one
    local body
    body=$(curl -s "$(url)/healthz")
    echo "$body"
    grep -q '"isolation"' <<<"$body" || { echo "(no isolation field yet)"; return 1; }
    grep -q "$1" <<<"$body"
}

lean() {  # no compiler, and none of pyproject.toml's development extras
    local extras
    read -ra extras < <("$(python311)" - <<'EOF'
import re, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
print(" ".join(re.split(r"[<>=!~\[; ]", req)[0] for req in extras["dev"]))
EOF
    )
    [[ ${#extras[@]} -gt 0 ]] || { echo "no development extras read from pyproject.toml"; return 1; }
    # shellcheck disable=SC2016  # the script runs in the container; $1... are its arguments
    pm run --rm --no-healthcheck "${limit_flags[@]}" --entrypoint sh "$IMAGE" -c '
        for tool in gcc cc c++ g++ clang make ld as; do
            command -v "$tool" >/dev/null && found="${found:-} $tool"
        done
        for dist in "$@"; do pip show -q "$dist" >/dev/null 2>&1 && found="${found:-} $dist"; done
        echo "compilers, make, binutils and the dev extras ($*) found:${found:- none}"
        [ -z "${found:-}" ]' sh "${extras[@]}"
}

report_size() {
    local bytes parts
    bytes=$(pm image inspect --format '{{.Size}}' "$IMAGE")
    # shellcheck disable=SC2016
    parts=$(pm run --rm --no-healthcheck --user 0 "${limit_flags[@]}" --entrypoint sh "$IMAGE" -c '
        cd /opt/venv/lib/python3.11/site-packages
        du -sm torch sympy numpy numpy.libs matplotlib fontTools networkx /usr /var /app |
            sort -rn | awk "{printf \"%s %s MB, \", \$2, \$1}"')
    info "image size $((bytes / 1000000)) MB; largest parts: ${parts%, }"
}

grades_as_command() {  # the command replaces `serve`: a cold CLI grading of the reference
    local out
    out=$(pm run --rm --no-healthcheck "${limit_flags[@]}" "${SANDBOX_FLAGS[@]}" "$IMAGE" \
        grade /app/reference/gspo.py --json - 2>"$CACHE/grade.err") || true
    "$(python311)" - "$out" "$(tail -3 "$CACHE/grade.err")" <<'EOF'
import json, sys
try:
    report = json.loads(sys.argv[1])  # one file: one report
except ValueError:
    sys.exit(f"no report: {sys.argv[1][:200]} {sys.argv[2]}")
print(f"passed {report['passed']}, {report['score']:g}/{report['max_score']:g},",
      f"isolation {report['isolation']!r}")
sys.exit(not (report["passed"] and report["isolation"].startswith("bwrap")))
EOF
}

confined_run() {
    say "-- with the sandbox flags: ${SANDBOX_FLAGS[*]}"
    start_container "$NAME" "${SANDBOX_FLAGS[@]}"
    check "/healthz answers 200" healthy "$NAME" 300
    check "the image's HEALTHCHECK passes" health_check "$NAME"
    check "the container runs as a non-root user" non_root "$NAME"
    check "doctor inside reports the bwrap level" doctor_says "$NAME" "Sandbox level: bwrap (bubblewrap"
    check "a Submit of the reference passes, in a worker forked by the zygote" \
        submit "$(url)" reference/gspo.py --expect pass --isolation "bwrap (zygote fork): "
    check "a Submit of the starter fails, by the student's code" \
        submit "$(url)" starter/gspo.py --expect fail --isolation "bwrap (zygote fork): "
    check "every exercise folder is in the image" exercises_match "$NAME"
    check "pid 1 reaps orphaned processes" orphans_reaped "$NAME"
    check "the service stops on SIGTERM" stops_cleanly "$NAME"
    check "gspo-grader grade, given as the command, passes the reference" grades_as_command
}

default_runs() {
    say "-- with the engine's defaults (no extra flags)"
    start_container "$NAME-defaults"
    check "GSPO_GRADER_SANDBOX_REQUIRE=bwrap (the image's default): the service refuses to start" \
        refuses_to_start "$NAME-defaults" 120 "in a container, run it with the flags in docs/deploy.md"
    remove_container "$NAME-defaults"
    start_container "$NAME-rlimits" -e GSPO_GRADER_SANDBOX_REQUIRE=
    check "GSPO_GRADER_SANDBOX_REQUIRE unset: doctor says rlimits, warns, names the flags" \
        doctor_says "$NAME-rlimits" "Sandbox level: rlimits (prlimit+setpriv)" \
        "WARNING: the sandbox runs on resource limits only" \
        "HINT: bwrap is installed but its probe failed" "--security-opt 'unmask=/proc/*' (podman)"
    check "GSPO_GRADER_SANDBOX_REQUIRE unset: /healthz answers 200" \
        healthy "$NAME-rlimits" 300
    check "GSPO_GRADER_SANDBOX_REQUIRE unset: the report says rlimits only" \
        submit "$(url)" reference/gspo.py --expect pass --isolation "RLIMITS ONLY: uid 10001 (judge's)"
    check "GSPO_GRADER_SANDBOX_REQUIRE unset: /healthz names the level" healthz_names_level rlimits
    remove_container "$NAME-rlimits"
}

# ---- --compose: deploy/compose.yaml, brought up with podman-compose ---------------------------
COMPOSE_PASSWORD=""  # set by compose_run: a new one each run

compose() {  # podman-compose on this project, with the stand-ins and this machine's quirks
    GRADER_IMAGE=$IMAGE POSTGRES_IMAGE=$POSTGRES_BASE PROXY_IMAGE=$PROXY_BASE \
        GRADER_PORT=127.0.0.1:$PORT GRADER_POOL_SIZE=1 POSTGRES_PASSWORD=$COMPOSE_PASSWORD \
        podman-compose --no-ansi -p "$PROJECT" -f deploy/compose.yaml \
        --podman-run-args "${podman_global[*]} ${limit_flags[*]}" "$@"
}

container_of() { printf '%s_%s_%s' "$PROJECT" "$1" "${2:-1}"; }  # service, number: its container

compose_down() {  # every container, the network and the volumes of the project, gone
    [[ $compose_mode -eq 1 ]] || return 0
    local name
    # -v: the anonymous /data volume each grader container gets from the image's VOLUME
    # (podman-compose 1.0.3's down leaves those behind); then down removes the named one
    for name in $(pm ps -a --format '{{.Names}}' --filter "label=io.podman.compose.project=$PROJECT"); do
        pm rm -f -v -t 10 "$name" >/dev/null 2>>"$CACHE/compose.log" || true
    done
    compose down -v -t 10 >>"$CACHE/compose.log" 2>&1 || true
    pm network rm -f "${PROJECT}_default" >/dev/null 2>&1 || true
    pm volume rm -f "${PROJECT}_pgdata" >/dev/null 2>&1 || true
}

migrated() {  # the one-shot `db upgrade` ran to its end (restarted until the database is up)
    local name began=$SECONDS state restarts
    name=$(container_of migrate)
    while ((SECONDS - began < $1)); do
        state=$(pm inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$name" 2>&1) || true
        [[ $state == "exited 0" ]] && break
        sleep 2
    done
    restarts=$(pm inspect --format '{{.RestartCount}}' "$name" 2>/dev/null || echo '?')
    echo "$state after $((SECONDS - began)) s, $restarts restart(s): $(pm logs "$name" 2>&1 | tail -1)"
    [[ $state == "exited 0" ]]
}

grading_nodes_seen() {  # /healthz through the proxy is ok and counts $2 nodes, within $1 s
    local began=$SECONDS body="" seen=0 want=$2
    while ((SECONDS - began < $1)); do
        body=$(curl -s -w ' %{http_code}' "$(url)/healthz" || true)
        seen=$(sed -n 's/.*"workers":\([0-9]*\).*/\1/p' <<<"$body")
        [[ $body == *'"status":"ok"'*' 200' && ${seen:-0} -eq $want ]] && break
        sleep 3
    done
    echo "after $((SECONDS - began)) s, grading nodes $seen: $body"
    [[ $body == *'"status":"ok"'*' 200' && ${seen:-0} -eq $want ]]
}

round_robin() {  # n requests through the proxy: both API nodes answered some of them
    local n=$1 before1 before2 one two
    before1=$(pm logs "$(container_of api-1)" 2>&1 | grep -c 'GET /healthz') || true
    before2=$(pm logs "$(container_of api-2)" 2>&1 | grep -c 'GET /healthz') || true
    for _ in $(seq "$n"); do curl -s -o /dev/null "$(url)/healthz"; done
    sleep 1
    one=$(( $(pm logs "$(container_of api-1)" 2>&1 | grep -c 'GET /healthz') - before1 ))
    two=$(( $(pm logs "$(container_of api-2)" 2>&1 | grep -c 'GET /healthz') - before2 ))
    echo "$n requests: api-1 answered $one, api-2 $two"
    [[ $one -gt 0 && $two -gt 0 && $((one + two)) -eq $n ]]
}

node_healthy() {  # the worker's compose healthcheck (GET /healthz on 9400), run once
    local test
    test=$(pm inspect --format '{{json .Config.Healthcheck.Test}}' "$1")
    echo "${test:-no healthcheck}"
    [[ $test == *9400/healthz* ]] && pm healthcheck run "$1"
}

node_metrics() {  # both grading nodes' /metrics: warm, and counting the Submits between them
    local want=$1 text total=0 count name
    for name in "$(container_of worker 1)" "$(container_of worker 2)"; do
        text=$(pm exec "$name" python -c "import urllib.request; print(urllib.request.urlopen(
            'http://127.0.0.1:9400/metrics', timeout=4).read().decode())") || return 1
        count=$(awk '/^gspo_grader_gradings_total\{mode="submit",outcome="(passed|failed)"\}/ {
            n += $2 } END { print n + 0 }' <<<"$text")
        printf '%s: %s Submit(s), %s; ' "${name##*_worker_}" "$count" \
            "$(grep -E '^gspo_grader_ready ' <<<"$text")"
        grep -q '^gspo_grader_ready 1' <<<"$text" || return 1
        total=$((total + count))
    done
    echo "in all $total, expected $want"
    [[ $total -eq $want ]]
}

compose_run() {
    say "-- deploy/compose.yaml with podman-compose $(podman-compose version 2>/dev/null |
        sed -n 's/^podman-compose[a-z]* version *//p' | head -1) (project $PROJECT)"
    COMPOSE_PASSWORD=check-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    compose_down
    local began=$SECONDS
    if ! compose up -d >"$CACHE/compose.log" 2>&1; then
        fail "podman-compose up: $(tail -3 "$CACHE/compose.log" | tr '\n' ' ')"
        return
    fi
    info "podman-compose up -d returned in $((SECONDS - began)) s (log: $CACHE/compose.log)"
    check "the one-shot db upgrade ran to its end" migrated 180
    check "/healthz through the proxy: ok, with both grading nodes" grading_nodes_seen 420 2
    info "the stack was ready $((SECONDS - began)) s after up"
    check "the proxy spreads requests over both API nodes" round_robin 10
    check "grading node 1 passes its healthcheck" node_healthy "$(container_of worker 1)"
    check "grading node 2 passes its healthcheck" node_healthy "$(container_of worker 2)"
    check "doctor in a grading node reports the bwrap level" \
        doctor_says "$(container_of worker 1)" "Sandbox level: bwrap (bubblewrap"
    check "a Submit of the reference through the proxy passes, in a forked worker" \
        submit "$(url)" reference/gspo.py --expect pass --isolation "bwrap (zygote fork): "
    check "a Submit of the starter through the proxy fails, by the student's code" \
        submit "$(url)" starter/gspo.py --expect fail --isolation "bwrap (zygote fork): "
    check "the grading nodes' /metrics count the two Submits" node_metrics 2
    check "podman-compose down leaves no container, network or volume" taken_down
}

taken_down() {
    local began=$SECONDS left
    compose_down
    left=$(pm ps -a --filter "label=io.podman.compose.project=$PROJECT" --format '{{.Names}}')
    left+=$(pm network ls --format '{{.Name}}' | grep -x "${PROJECT}_default" || true)
    left+=$(pm volume ls --format '{{.Name}}' | grep -x "${PROJECT}_pgdata" || true)
    echo "in $((SECONDS - began)) s; left: ${left:-nothing}"
    [[ -z $left ]]
}

main() {
    local began=$SECONDS fresh=0
    for arg in "$@"; do
        case $arg in
        --fresh) fresh=1 ;;
        --compose) compose_mode=1 ;;
        *) die "unknown option $arg (--fresh, --compose)" ;;
        esac
    done
    [[ $(id -u) -eq 0 ]] || die "run as root: the checks use rootful podman"
    install_tools
    engine_quirks
    mkdir -p "$CACHE"
    if [[ $fresh -eq 1 ]]; then
        for image in "$IMAGE" "$POSTGRES_BASE" "$PROXY_BASE" "$PYTHON_BASE" "$NODE_BASE"; do
            pm rmi -f --ignore "$image" >/dev/null
        done
        rm -rf "${CACHE:?}"/*
    fi
    make_bases
    make_wheelhouse
    build_image
    check "no compiler or development tool in the image" lean
    report_size
    if [[ $compose_mode -eq 1 ]]; then
        make_compose_bases
        compose_run
    else
        confined_run
        default_runs
    fi
    info "done in $((SECONDS - began)) s: $failures check(s) failed"
    [[ $failures -eq 0 ]]
}

trap 'stop_index; remove_containers; compose_down' EXIT
main "$@"
