"""The instructor's statistics at scale: seeds 1,000 students and 20,000 graded Submits
(synthetic rows: 40 tests each, a few common mistakes) into a fresh database, then times
GET /api/instructor/stats over HTTP (the app in this process, its grader idle) and prints
the figures. Aim: under 1 s.

    .venv/bin/python bench/bench_instructor.py                      # SQLite
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

from grader.exercise import catalog
from grader.mistakes import Signatures
from grader.service import create_app, load_settings
from grader.store import open_store
from grader.store.schema import gradings, students, submissions, test_verdicts

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="default: SQLite in a temp dir")
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--submissions", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/grader.sqlite3"
        began = time.perf_counter()
        seed(url, args.students, args.submissions // args.students)
        print(f"seeded {args.students} students, {args.submissions} Submits,"
              f" {args.submissions * len(TESTS)} verdicts in {time.perf_counter() - began:.1f} s"
              f" ({url.split(':')[0]})")  # fmt: skip
        Signatures(Path(tmp) / "mistakes").save(catalog()["gspo"], {})  # none known
        settings = load_settings(data_dir=Path(tmp), database_url=args.database_url,
                                 instructor_token=TOKEN)  # fmt: skip
        with TestClient(create_app(settings, IdleGrader())) as client:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            times = []
            for _ in range(args.repeats):
                began = time.perf_counter()
                answer = client.get("/api/instructor/stats?exercise=gspo", headers=auth)
                times.append(time.perf_counter() - began)
                assert answer.status_code == 200, answer.text
            stats = answer.json()
    print(f"GET /api/instructor/stats: median {statistics.median(times) * 1000:.0f} ms,"
          f" max {max(times) * 1000:.0f} ms over {args.repeats} requests (aim: under 1000 ms);"
          f" {stats['students']} students, {len(stats['tests'])} tests,"
          f" {len(stats['mistakes'])} mistake groups, {len(stats['stuck'])} stuck")  # fmt: skip


if __name__ == "__main__":
    main()
