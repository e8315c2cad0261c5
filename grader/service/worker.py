"""`gspo-grader worker`: a grading node of the distributed deployment.

It keeps warm judges (a `Grader` of `--concurrency` judge processes, each with its zygote)
and takes jobs from procrastinate's queue in PostgreSQL:

  gspo_grader.grade(kind, job_id)       grade a submission or a Run (GradingNode); a grader
                                        fault is retried once, as a new job
  gspo_grader.draw_plots(kind, job_id)  queued with the verdict on a queue of its own, taken
                                        one at a time beside the gradings: draw the toy's
                                        plots and store the PNGs (API nodes import no torch,
                                        and the exercise's experiment.py does)

Every worker sends a heartbeat every `heartbeat_seconds` and looks for jobs whose worker
has been silent for `stalled_seconds` (killed, SIGSTOPped, its machine gone): such a job is
queued again, or, after its second attempt, finished as ungradable. Its own counters are
served as Prometheus text on http://0.0.0.0:METRICS_PORT/metrics, and whether it can grade
on /healthz there (metrics_server.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import procrastinate
from procrastinate.jobs import Status

from grader.exercise import catalog
from grader.report import Report
from grader.service.database import DatabaseError
from grader.service.grading_node import MAX_ATTEMPTS, GradingNode, Job
from grader.service.metrics import Metrics
from grader.service.metrics_server import MetricsServer
from grader.service.plots import artifacts_key, draw_pngs, experiment_module
from grader.service.procrastinate_queue import (
    GRADE_TASK,
    PLOTS_QUEUE,
    PLOTS_TASK,
    QUEUE,
    QUEUES,
    deferring_app,
    grade_job_writer,
    job_writer,
    libpq_url,
)
from grader.service.server import check_database, check_exercises, check_sandbox, configure_logging
from grader.service.settings import Settings, load_settings
from grader.service.state import build_grader
from grader.service.store import IN_FLIGHT, Enqueue, open_store
from grader.service.views import toy_result

log = logging.getLogger(__name__)

RESTART_PAUSE_S = 2.0  # after the database went away, before the queue is read again


class GradingWorker:
    def __init__(self, settings: Settings, concurrency: int, grader=None):
        url = settings.resolved_database_url
        self.settings = settings
        self.concurrency = concurrency
        self.metrics = Metrics()
        self.store = open_store(url)
        self.grader = grader if grader is not None else build_grader(settings, concurrency)
        self.deferrer = deferring_app(url)
        self.node = GradingNode(
            self.store,
            self.grader,
            self.metrics,
            after_verdict=self._plots_job,
            retry_job=lambda job: grade_job_writer(self.deferrer, job),
        )
        self.app = procrastinate.App(
            connector=procrastinate.PsycopgConnector(conninfo=libpq_url(url))
        )
        self.app.task(name=GRADE_TASK, queue=QUEUE)(self.grade)
        self.app.task(name=PLOTS_TASK, queue=PLOTS_QUEUE)(self.draw_plots)
        self.in_flight = 0
        self.stopping = False

    # ---- the tasks (run on procrastinate's threads) --------------------------------------
    def grade(self, kind: str, job_id: str) -> None:
        job = Job(kind, job_id)
        self.in_flight += 1
        try:
            self.node.run(job)  # a retry is queued by the node itself
        finally:
            self.in_flight -= 1

    def draw_plots(self, kind: str, job_id: str) -> None:
        record = self.store.get(kind, job_id)
        exercise = catalog().get(record.exercise) if record else None
        if record is None or exercise is None or record.report_json is None:
            return
        result = toy_result(Report.model_validate_json(record.report_json))
        key = artifacts_key(exercise.id, result or {})
        if result is not None and exercise.plots and not self.store.has_plots(key):
            self.store.save_plots(key, draw_pngs(exercise, result))

    def _plots_job(self, job: Job, report: Report) -> Enqueue | None:
        if report.grader_error is not None or toy_result(report) is None:
            return None
        return job_writer(self.deferrer, PLOTS_TASK, PLOTS_QUEUE, kind=job.kind, job_id=job.job_id)

    # ---- the process ---------------------------------------------------------------------
    async def run(self) -> None:
        """Warm the judges, then take jobs until SIGTERM/SIGINT."""
        self.grader.start()
        if not await asyncio.to_thread(self.grader.wait_ready, 600.0):
            raise RuntimeError(f"the judges did not start: {self.grader.start_error}")
        await asyncio.to_thread(warm_plots)
        metrics = MetricsServer(self.settings.metrics_port, self.exposition, healthy=self.healthy)
        metrics.start()
        reaper = asyncio.create_task(self.reap_forever(), name="reaper")
        try:
            await self._take_jobs()
        finally:
            reaper.cancel()
            metrics.stop()
            self.grader.close()
            self.store.close()

    async def _take_jobs(self) -> None:
        """Two procrastinate workers in this process: the gradings (`concurrency` at once)
        and the plots (one at a time). SIGTERM/SIGINT stop both."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        while not stop.is_set():
            try:
                async with self.app.open_async():
                    workers = [
                        asyncio.create_task(self._procrastinate(QUEUE, self.concurrency)),
                        asyncio.create_task(self._procrastinate(PLOTS_QUEUE, 1)),
                    ]
                    stopped = asyncio.create_task(stop.wait())
                    done, _ = await asyncio.wait(
                        [stopped, *workers], return_when=asyncio.FIRST_COMPLETED
                    )
                    for task in [stopped, *workers]:
                        task.cancel()
                    await asyncio.gather(stopped, *workers, return_exceptions=True)
                    for task in done - {stopped}:
                        task.result()  # a worker that failed: read the queue again
            except Exception:
                log.exception("the queue failed; reading it again in %g s", RESTART_PAUSE_S)
                await asyncio.sleep(RESTART_PAUSE_S)

    async def _procrastinate(self, queue: str, concurrency: int) -> None:
        await self.app.run_worker_async(
            queues=[queue],
            name=queue,
            concurrency=concurrency,
            update_heartbeat_interval=self.settings.heartbeat_seconds,
            stalled_worker_timeout=self.settings.stalled_seconds,
            fetch_job_polling_interval=1.0,
            delete_jobs="successful",
            install_signal_handlers=False,
        )

    async def reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_seconds)
            try:
                await self.reap()
            except Exception:
                log.warning("could not look for stalled jobs", exc_info=True)

    async def reap(self) -> None:
        """Queue again (or give up on) the jobs of grading nodes that went silent."""
        manager = self.app.job_manager
        stalled = []
        for queue in QUEUES:
            stalled += await manager.get_stalled_jobs(
                queue=queue, seconds_since_heartbeat=self.settings.stalled_seconds
            )
        for job in stalled:
            kind, job_id = job.task_kwargs["kind"], job.task_kwargs["job_id"]
            record = await asyncio.to_thread(self.store.get, kind, job_id)
            if job.task_name == PLOTS_TASK or record is None or record.status not in IN_FLIGHT:
                await _quietly(
                    manager.retry_job(job)
                    if job.attempts < MAX_ATTEMPTS
                    else manager.finish_job(job, Status.FAILED, delete_job=False)
                )
                continue
            if record.attempts >= MAX_ATTEMPTS:
                lost = f"the grading node stopped answering on attempt {record.attempts}"
                log.warning("giving up on %s:%s: %s", kind, job_id, lost)
                await asyncio.to_thread(self.node.give_up, Job(kind, job_id), record.exercise, lost)
                await _quietly(manager.finish_job(job, Status.FAILED, delete_job=False))
                continue
            log.warning("%s:%s was lost with its grading node; queued again", kind, job_id)
            await asyncio.to_thread(self.store.requeue, kind, job_id)
            self.metrics.observe_retry()
            await _quietly(manager.retry_job(job))
        await asyncio.to_thread(self.adopt_orphans)

    def adopt_orphans(self) -> None:
        """Jobs whose task failed on the database (it went away mid-grading) have no queue
        job left: queue them again, or give up after their last attempt."""
        for kind, job_id in self.store.orphans(GRADE_TASK):
            job = Job(kind, job_id)
            record = self.store.get(kind, job_id)
            if record is not None and record.attempts >= MAX_ATTEMPTS:
                self.node.give_up(job, record.exercise, "the database went away on every attempt")
            elif self.store.adopt(kind, job_id, GRADE_TASK, grade_job_writer(self.deferrer, job)):
                log.warning("%s was left without a queue job; queued again", job.key)

    def healthy(self) -> bool:
        """At least one judge is warm: this node can grade (GET /healthz on the metrics port)."""
        stats = self.grader.stats()
        return stats["ready"] + stats["busy"] > 0

    def exposition(self) -> str:
        try:
            waiting = float(self.store.waiting())
        except Exception:
            waiting = -1.0
        gauges = {
            "gspo_grader_queue_depth": ("Gradings waiting in the whole cluster.", waiting),
            "gspo_grader_in_flight": ("Gradings running on this node now.", self.in_flight),
            "gspo_grader_pool_size": ("Warm judge processes on this node.", self.concurrency),
            "gspo_grader_ready": ("1 once the judges are warm.", int(bool(self.grader.ready))),
        }
        return self.metrics.render(gauges)


def warm_plots() -> None:
    """Import every exercise's experiment and matplotlib before the first job, so the first
    plots are not seconds late."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401

    for exercise in catalog().values():
        if exercise.experiment.is_file():
            experiment_module(exercise.experiment)


async def _quietly(step) -> None:
    """Another worker may have recovered the same job a moment ago; that is fine."""
    try:
        await step
    except Exception as error:
        log.debug("stalled job already handled: %s", error)


def start_worker(concurrency: int | None = None, metrics_port: int | None = None) -> None:
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
    check_sandbox()
    worker = GradingWorker(settings, concurrency or settings.pool_size)
    asyncio.run(worker.run())
