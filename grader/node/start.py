"""`gspo-grader worker`: a grading node of the distributed deployment, and the checks that
every process which grades runs before it starts.

It keeps warm judges (a `Grader` of `--concurrency` judge processes, each with its zygote)
and a GradingNode that claims queued gradings from PostgreSQL, woken by NOTIFY or a short
poll. It sends a heartbeat every `heartbeat_seconds`; gradings of nodes silent for
`stalled_seconds` (killed, SIGSTOPped, their machine gone) are queued again by any live node
(runner.recover_lost). Its counters are served as Prometheus text on
http://0.0.0.0:METRICS_PORT/metrics, and whether it can grade on /healthz there.

It imports no web framework: none of fastapi, starlette, uvicorn, joserfc or httpx.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading

from grader.exercise import catalog
from grader.node.lanes import lanes_of, pool_sizes
from grader.node.metrics import Metrics
from grader.node.metrics_server import MetricsServer
from grader.node.runner import GradingNode
from grader.sandbox import check_host
from grader.settings import Settings, load_settings
from grader.store import WORK_CHANNEL, DatabaseError, open_store
from grader.store.database import check_schema, open_engine
from grader.store.listener import Listener

log = logging.getLogger(__name__)


def check_exercises() -> None:
    """Fail before starting when an exercise or its tier registry is broken (the error names
    the file): a process that started with no tiers would look healthy and grade nothing."""
    from grader.judge import load_tiers

    for exercise in catalog().values():
        load_tiers(exercise.tiers_file)


def check_database(settings: Settings) -> None:
    """DatabaseError unless a PostgreSQL database answers and is migrated (SQLite
    migrates itself)."""
    if not settings.distributed:
        return
    engine = open_engine(settings.resolved_database_url)
    try:
        check_schema(engine)
    finally:
        engine.dispose()


def configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )


def build_graders(settings: Settings, metrics: Metrics, concurrency: int, pool_size: int):
    """The real, warm graders of a node of `concurrency` claim loops and `pool_size` judges:
    pre-started judge processes, each with a sandbox worker ready; each grading's counters
    go to `metrics`. (live, shared): `shared` grades the claim loops that may take regrade
    work, its judges at `settings.regrade_nice`; None when every loop grades on `live`
    (lanes.py)."""
    from grader.judge import Grader

    lanes = lanes_of(concurrency, settings.live_judges, settings.regrade_nice)
    live_size, shared_size = pool_sizes(lanes, pool_size)
    options = {"limits": settings.sandbox_limits(), "on_stats": metrics.observe_stats}
    live = Grader(live_size, **options)
    shared = Grader(shared_size, nice=lanes.nice, **options) if shared_size else None
    return live, shared


def node_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def start_node(concurrency: int | None = None, metrics_port: int | None = None) -> None:
    """What `gspo-grader worker` runs: blocks until SIGTERM/SIGINT. SettingsError or
    DatabaseError (one line) before anything starts when it cannot work."""
    overrides = {"metrics_port": metrics_port} if metrics_port is not None else {}
    settings = load_settings(**overrides)
    configure_logging(settings)
    os.umask(0o077)  # whatever the node writes (plots before they are stored) is private
    if not settings.distributed:
        raise DatabaseError(
            "a grading node needs the distributed queue: set GSPO_GRADER_DATABASE_URL to a "
            "postgresql:// URL (the embedded service grades in its own process)"
        )
    check_exercises()
    check_database(settings)
    check_host()
    concurrency = concurrency or settings.pool_size
    store = open_store(settings.resolved_database_url)
    metrics = Metrics()
    grader, shared = build_graders(settings, metrics, concurrency, concurrency)
    graders = [g for g in (grader, shared) if g is not None]
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    for each in graders:
        each.start()
    for each in graders:
        if not each.wait_ready(600.0):
            raise RuntimeError(f"the judges did not start: {each.start_error}")
    node = GradingNode(store, grader, metrics, node_name(), concurrency,
                       settings.heartbeat_seconds, settings.stalled_seconds,
                       live_judges=settings.live_judges, shared_grader=shared,
                       regrade_lull_s=settings.regrade_lull_seconds,
                       reuse=settings.verdict_reuse())  # fmt: skip
    listener = Listener(settings.resolved_database_url, WORK_CHANNEL, lambda _: node.wake())

    def warm() -> bool:
        return all(g.ready for g in graders)

    def exposition() -> str:
        try:
            waiting = float(store.waiting())
        except Exception:
            waiting = -1.0
        gauges = {
            "gspo_grader_queue_depth": ("Gradings waiting in the whole cluster.", waiting),
            "gspo_grader_in_flight": ("Gradings running on this node now.", node.in_flight),
            "gspo_grader_pool_size": ("Warm judge processes on this node.", concurrency),
            "gspo_grader_ready": ("1 once the judges are warm.", int(warm())),
        }
        return metrics.render(gauges)

    def healthy() -> bool:
        return sum(g.stats()["ready"] + g.stats()["busy"] for g in graders) > 0

    server = MetricsServer(settings.metrics_port, exposition, healthy=healthy)
    server.start()
    listener.start()
    node.start()
    log.info("grading node %s started with %d judges (%d for live work only; the others at "
             "niceness %d)", node.name, concurrency, node.lanes.live_only,
             settings.regrade_nice if shared else 0)  # fmt: skip
    try:
        stop.wait()
    finally:
        node.close()
        listener.close()
        server.stop()
        for each in graders:
            each.close()
        store.close()
