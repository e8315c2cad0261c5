"""Why an LTI request is refused: one exception, shown as a page with a 4xx status.

Every check of a login or a launch raises `Refused(status, title, detail)`; the routes turn
it into a page that says what was wrong and who can fix it (the student relaunches, the
instructor or the LMS administrator changes the registration). An LMS that cannot be reached
is a 502: the tool's side of the conversation failed, never the student.
"""

from __future__ import annotations


class Refused(Exception):
    def __init__(self, status: int, title: str, detail: str):
        super().__init__(f"{title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail


RELAUNCH = "Open the exercise again from your course."
ASK_ADMIN = "Ask the LMS administrator to check the tool's registration (see docs/lti.md)."
