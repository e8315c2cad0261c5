"""The instructor's statistics at scale: seeds 1,000 students and 20,000 graded Submits
(synthetic rows: 40 tests each, a few common mistakes) into a fresh database, gives the
`default` course a schedule (best policy, a late window, practice after), then times
GET /api/instructor/stats over HTTP (the app in this process, its grader idle), for every
course and for `default`, and prints the figures: wall time, and this process's CPU time
(the app, and SQLite's work; PostgreSQL's own work is in its server processes).
Aim: under 1 s.

    .venv/bin/python bench/bench_instructor.py                      # SQLite
    .venv/bin/python bench/bench_instructor.py --postgres           # a cluster of its own
    .venv/bin/python bench/bench_instructor.py --database-url postgresql://...
"""

from __future__ import annotations

import argparse
import random
import secrets
import statistics
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import insert

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from grader.exercise import catalog
from grader.mistakes import Signatures
from grader.service import create_app, load_settings
from grader.store import open_store
from grader.store.schema import gradings, students, submissions, test_verdicts
from grader.term import LateWindow, Schedule

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "grader" / "service"))
from postgres_server import PostgresServer, find_bindir  # the tests' helper

TOKEN = "bench-instructor-token-0123456789abcdefghij"
TESTS = [f"test_t{t // 10}.py::test_{t}" for t in range(40)]
MISTAKES = [frozenset(random.Random(m).sample(TESTS, 3 + m)) for m in range(6)]


class IdleGrader:
    """The embedded service's grader, idle: nothing is graded while the bench reads."""

    ready = True

    def start(self) -> None: ...

    def close(self) -> None: ...

    def stats(self) -> dict:
        return {"pool_size": 1}


def seed(url: str, n_students: int, per_student: int) -> None:
    rng = random.Random(0)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    store = open_store(url, migrate=True)
    with store.write() as c:
        at = start.isoformat()
        c.execute(insert(students), [
            {"name": f"s{i:04d}", "key_hash": "x", "created_at": at} for i in range(n_students)
        ])  # fmt: skip
        for i in range(n_students):
            rows, grades, verdicts = [], [], []
            fixed = rng.random() < 0.5
            for k in range(per_student):
                sid, gid = secrets.token_hex(16), secrets.token_hex(16)
                when = (start + timedelta(minutes=k * 97 + i)).isoformat()
                failing = frozenset() if fixed and k > per_student // 2 else rng.choice(MISTAKES)
                score = 100.0 * (len(TESTS) - len(failing)) / len(TESTS)
                rows.append({"submission_id": sid, "kind": "submit", "student": f"s{i:04d}",
                             "client": f"s{i:04d}", "exercise": "gspo", "code": "# code",
                             "accepted_at": when})  # fmt: skip
                grades.append({"grading_id": gid, "submission_id": sid, "current": True,
                               "priority": 0, "status": "done", "attempts": 1, "score": score,
                               "max_score": 100.0, "passed": not failing, "queued_at": when,
                               "report_json": "{}"})  # fmt: skip
                verdicts += [{"grading_id": gid, "test_id": t, "passed": t not in failing}
                             for t in TESTS]  # fmt: skip
            c.execute(insert(submissions), rows)
            c.execute(insert(gradings), grades)
            c.execute(insert(test_verdicts), verdicts)
    store.close()


def schedule_default(url: str) -> None:
    """Due a day into the seeded Submits (which span two days), 50 % for 12 hours more,
    then practice: about a quarter of the Submits are practice."""
    store = open_store(url)
    due = datetime(2026, 11, 2, tzinfo=UTC)
    late = (LateWindow(due + timedelta(hours=12), 50.0),)
    store.set_term("default", "gspo", {"schedule": Schedule(due, late=late, policy="best")})
    store.close()


def timed(client, url: str, repeats: int) -> tuple[list[float], list[float], dict]:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        answer = client.get(url, headers=auth)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        assert answer.status_code == 200, answer.text
    return walls, cpus, answer.json()


def spread(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"median {statistics.median(ms):.0f} ms (min {ms[0]:.0f}, max {ms[-1]:.0f})"


def run(url: str, tmp: str, args) -> None:
    began = time.perf_counter()
    seed(url, args.students, args.submissions // args.students)
    schedule_default(url)
    print(f"seeded {args.students} students, {args.submissions} Submits,"
          f" {args.submissions * len(TESTS)} verdicts in {time.perf_counter() - began:.1f} s"
          f" ({url.split(':')[0]})")  # fmt: skip
    Signatures(Path(tmp) / "mistakes").save(catalog()["gspo"], {})  # none known
    settings = load_settings(data_dir=Path(tmp), database_url=url, instructor_token=TOKEN)
    with TestClient(create_app(settings, IdleGrader())) as client:
        for query in ("exercise=gspo", "exercise=gspo&course=default"):
            timed(client, f"/api/instructor/stats?{query}", 1)  # warm the caches
            walls, cpus, stats = timed(client, f"/api/instructor/stats?{query}", args.repeats)
            print(f"GET /api/instructor/stats?{query}: wall {spread(walls)}, CPU of this"
                  f" process {spread(cpus)} over {args.repeats} requests (aim: under 1000 ms);"
                  f" {stats['students']} students, {stats['practice_submissions']} practice"
                  f" Submits, {len(stats['tests'])} tests, {len(stats['mistakes'])} mistake"
                  f" groups, {len(stats['stuck'])} stuck")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp dir")
    parser.add_argument("--postgres", action="store_true", help="start a PostgreSQL cluster")
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--submissions", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.postgres:
            run(args.database_url or f"sqlite:///{tmp}/grader.sqlite3", tmp, args)
            return
        bindir = find_bindir()
        if bindir is None:
            sys.exit("--postgres: PostgreSQL's initdb was not found")
        server = PostgresServer(bindir)
        try:
            server.start()
            run(server.new_database(), tmp, args)
        finally:
            server.destroy()


if __name__ == "__main__":
    main()
