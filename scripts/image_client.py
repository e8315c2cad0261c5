"""Submit a file to a running grader and check the verdict (used by scripts/check-image.sh).

    python scripts/image_client.py URL FILE --expect pass|fail [--isolation TEXT]

Exits 0 if a Submit of FILE gets the expected verdict from a working grader (no grader
error) and the report's isolation starts with TEXT; 1 otherwise. Prints one line: what it
saw. A 202 (the verdict took longer than the service waits, as through a queue) is followed
by polling the submission every second. Standard library only: it runs on the host,
outside the container.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

DEADLINE_S = 300  # for the whole Submit, polling included


def _verdict(base: str, body: dict, began: float) -> tuple[dict | None, int]:
    """(the report, polls made) once the submission is graded; (None, polls) past the
    deadline."""
    url = f"{base}/api/submissions/{body['submission_id']}"
    headers = {"X-Student-Key": body.get("student_key") or ""}
    polls = 0
    while body.get("report") is None and time.monotonic() - began < DEADLINE_S:
        time.sleep(1.0)
        polls += 1
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
            body = {**json.load(answer), "student_key": headers["X-Student-Key"]}
    return body.get("report"), polls


def submit(base: str, path: Path, expect: str, isolation: str) -> int:
    student = f"check-{path.parent.name}-{time.time_ns()}"  # a first Submit: no key needed
    body = {"code": path.read_text(encoding="utf-8"), "student": student}
    request = urllib.request.Request(
        f"{base}/api/submit",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    began = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE_S) as answer:
            status, body = answer.status, json.load(answer)
        report, polls = _verdict(base, body, began)
    except (OSError, ValueError, KeyError) as error:
        print(f"no report: {error}")
        return 1
    if report is None:
        print(f"no report within {DEADLINE_S} s: {body.get('status')} after {polls} polls")
        return 1
    seconds = time.monotonic() - began
    verdict = "pass" if report["passed"] else "fail"
    via = f" (answered {status}, then {polls} polls)" if status == 202 else ""
    seen = (
        f"{verdict}, {report['score']:g}/{report['max_score']:g} in {seconds:.1f} s{via}, "
        f"isolation {report['isolation']!r}"
    )
    if report.get("grader_error"):
        print(f"grader error: {report['grader_error']['message']} ({seen})")
        return 1
    if report["isolation"].startswith(isolation) and verdict == expect:
        print(seen)
        return 0
    print(f"expected {expect} with isolation {isolation!r}...; got {seen}")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("file", type=Path)
    parser.add_argument("--expect", choices=["pass", "fail"], required=True)
    parser.add_argument("--isolation", default="")
    args = parser.parse_args(argv)
    return submit(args.url.rstrip("/"), args.file, args.expect, args.isolation)


if __name__ == "__main__":
    sys.exit(main())
