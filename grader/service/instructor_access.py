"""Who may use the instructor's routes (routers/instructor.py, routers/course.py): the
instructor token, for every course, or an LTI instructor's session, for its own course only.

    @router.get("/api/instructor/...")
    async def route(access: InstructorOrLti, course: str | None = None):
        course = access.course_of(course)   # 403 for another course than the session's

A student's LTI session gets 403; a missing, forged or expired one 401 (its header is named
X-LTI-Session). A request carrying the token is judged by the token alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from grader.service.deps import bearer_token, get_service, require_instructor
from grader.service.lti.routes import lti_session
from grader.service.state import ServiceState
from grader.term import DEFAULT_COURSE

EVERY_COURSE = None


@dataclass(frozen=True)
class InstructorAccess:
    service: ServiceState
    course: str | None  # an LTI instructor's course (lti:<id>); None: the token's, every one

    def course_of(self, asked: str | None, default: str | None = DEFAULT_COURSE) -> str | None:
        """The course a request reads or changes: `asked` (or `default`) with the token;
        with an LTI session its own course, and 403 for another."""
        if self.course is None:
            return default if asked is None else asked
        if asked not in (None, self.course):
            raise HTTPException(
                403,
                f"Your LMS launch signed you in to course {self.course!r}; expected that"
                f" course, got {asked!r}. Launch from that course's LMS page to reach it.",
            )
        return self.course


async def instructor_access(
    request: Request,
    x_lti_session: Annotated[str | None, Header(description="An LTI instructor's session.")] = None,
) -> InstructorAccess:
    if x_lti_session is None or bearer_token(request) is not None:
        return InstructorAccess(require_instructor(request), None)
    session = await lti_session(request, x_lti_session)
    if session.role != "instructor":
        raise HTTPException(
            403,
            "The instructor's pages need an instructor's launch; you launched this tool from"
            " the LMS as a student.",
        )
    return InstructorAccess(get_service(request), f"lti:{session.course_id}")


InstructorOrLti = Annotated[InstructorAccess, Depends(instructor_access)]
