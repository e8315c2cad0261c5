"""The LTI side's HTTP endpoints, and what it holds while the service runs (`LtiService`,
`app.state.lti`: its store on the service's engine, the tool's keys, the platforms' key
sets, the AGS client and the passback drainer, in both deployments).

    GET|POST /lti/login        OIDC login initiation: redirect to the LMS's authorisation
    POST /lti/launch           the LMS's form post: a student goes to the page, with a
                               handoff code in the address's fragment; an instructor gets
                               the course view
    POST /lti/session          the page exchanges the handoff code for its session token
    GET  /lti/jwks             this tool's public keys
    POST /lti/instructor       the course view again (best or latest; post failed scores)
    GET  /api/lti/session      who is signed in, the exercise, and a renewed token
    POST /api/lti/submit       Submit; the score goes back to the LMS
    GET  /api/lti/submissions[/{id}]   the student's submissions through this link

Whatever a login or launch gets wrong is a page that says so with a 4xx status (502 when
the LMS could not be reached), never a 500.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, replace
from typing import Annotated
from urllib.parse import parse_qsl

import httpx
from fastapi import APIRouter, Depends, Header, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel
from sqlalchemy import Engine

from grader.exercise import catalog, default_exercise
from grader.service.background import end_tasks
from grader.service.credits import credited_rows
from grader.service.deps import Service, is_id
from grader.service.intake import Intake, accept
from grader.service.lti.credentials import (
    SESSION_HEADER,
    Session,
    ToolKeys,
    issue_handoff,
    issue_session,
    take_handoff,
    verify_session,
)
from grader.service.lti.launches import (
    ASK_ADMIN,
    RELAUNCH,
    PlatformKeys,
    Refused,
    cookie_name,
    iso_or_none,
    login_again_url,
    start_login,
    validate_launch,
)
from grader.service.lti.pages import fallback_page, instructor_page, refusal_page
from grader.service.lti.rows import Launch, LtiStore, Platform, row_writer
from grader.service.lti.scores import AgsClient, Outbox, Passback, TokenRefused
from grader.service.schemas import RunRequest, SubmissionItem, SubmissionList, SubmissionView
from grader.service.views import view_of
from grader.settings import Settings
from grader.store import Store

log = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 20.0  # one request to an LMS
MAX_FORM_BYTES = 64 * 1024  # an id_token is a few KiB
EXPIRED = "Your course session has expired; open the exercise again from your course."
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
READ_TIMEOUT_S = 5.0  # one GET of a line item


class DueDates:
    """An LMS's due date for a link, offered to its instructor as the exercise's due date
    (`suggested_due_at` in GET /api/instructor/course; the schedule is never set from it).

    Read when an instructor launches, from the link's custom parameter `due_at` (filled by
    the LMS when the link says `due_at=$ResourceLink.submission.endDateTime`; Canvas:
    `$Canvas.assignment.dueAt.iso8601`; a `$...` left as written, or a time without a zone,
    is ignored), then from the launch's AGS line item (its `endDateTime`, with a token for
    the `lineitem.readonly` or `lineitem` scope when the launch grants one), read after the
    launch has answered, with a short timeout; found, it replaces the parameter's date."""

    def __init__(self, store: Store, ags: AgsClient):
        self.store = store
        self.ags = ags
        self._tasks: set[asyncio.Task] = set()

    def offer(self, course: str, exercise: str, due_at: str | None) -> None:
        if due_at is not None:
            self.store.set_term(course, exercise, {"suggested_due_at": due_at})

    def read_later(self, platform: Platform, lineitem: tuple[str, str], course: str,
                   exercise: str) -> None:  # fmt: skip
        """Read the line item's end date in the background, and offer it when it has one."""
        task = asyncio.create_task(self._read(platform, lineitem, course, exercise))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Let reads under way end (each is bounded by READ_TIMEOUT_S, and its date is written
        before the store closes), then cancel any left."""
        await end_tasks(self._tasks, READ_TIMEOUT_S + 1.0)

    async def _read(self, platform: Platform, lineitem: tuple[str, str], course: str,
                    exercise: str) -> None:  # fmt: skip
        url, scope = lineitem
        try:
            due_at = await self.end_date(platform, url, scope)
            await asyncio.to_thread(self.offer, course, exercise, due_at)
        except Exception:  # an LMS or a database fault: the date is a courtesy, log it
            log.warning("the line item %s could not be read for its end date", url, exc_info=True)

    async def end_date(self, platform: Platform, url: str, scope: str) -> str | None:
        """The line item's `endDateTime` as ISO 8601, or None (none set, or unreadable)."""
        try:
            token = await self.ags.token(platform, scope)
            headers = {"Authorization": f"Bearer {token}", "Accept": LINEITEM_TYPE}
            response = await self.ags.http.get(url, headers=headers, timeout=READ_TIMEOUT_S)
            response.raise_for_status()
            body = response.json()
        except (TokenRefused, httpx.HTTPError, ValueError) as error:
            log.warning("the line item %s could not be read: %s", url, error)
            return None
        return iso_or_none(body.get("endDateTime")) if isinstance(body, dict) else None


class LtiService:
    def __init__(self, settings: Settings, engine: Engine):
        self.settings = settings
        self.store = LtiStore(engine)
        self.keys = ToolKeys(self.store)
        self.http: httpx.AsyncClient | None = None
        self.platform_keys: PlatformKeys | None = None
        self.passback: Passback | None = None
        self.due_dates: DueDates | None = None

    async def start(self) -> None:
        self.http = httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, follow_redirects=False)
        self.platform_keys = PlatformKeys(self.http, self.settings.lti_key_set_refetch_seconds)
        ags = AgsClient(self.http, self.keys)
        self.passback = Passback(self.store, ags, self.settings.lti_retry_seconds)
        self.due_dates = DueDates(Store(self.store.engine), ags)
        await self.passback.start()

    async def close(self) -> None:
        if self.due_dates is not None:
            await self.due_dates.close()
        if self.passback is not None:
            await self.passback.close()
        if self.http is not None:
            await self.http.aclose()

    def base_url(self, request: Request) -> str:
        """Where LMSs and browsers reach this service (setting public_url, else the request's)."""
        return self.settings.public_url or str(request.base_url).rstrip("/")


def get_lti(request: Request) -> LtiService:
    return request.app.state.lti


Lti = Annotated[LtiService, Depends(get_lti)]
router = APIRouter(prefix="/lti", tags=["lti"])
api_router = APIRouter(prefix="/api/lti", tags=["lti"])


async def params_of(request: Request) -> dict[str, str]:
    """Query parameters, and the fields of an urlencoded form body."""
    params = dict(request.query_params)
    if request.method == "POST":
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, "The request is too large", "An LTI form is a few KiB at most.")
        params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return params


@router.api_route("/login", methods=["GET", "POST"], response_class=HTMLResponse)
async def lti_login(request: Request, lti: Lti) -> Response:
    """OIDC login initiation: redirect to the LMS's authorisation endpoint."""
    try:
        params = await params_of(request)
        launch_url = lti.base_url(request) + "/lti/launch"
        address = request.client.host if request.client else None
        most = lti.settings.lti_logins_per_address
        return await asyncio.to_thread(start_login, lti.store, params, launch_url, address, most)
    except Refused as refused:
        return refusal_page(refused)


@router.post("/launch", response_class=HTMLResponse)
async def lti_launch(request: Request, lti: Lti) -> Response:
    """The LMS's form post with the id_token: validate it, then open the exercise."""
    try:
        return await accept_launch(request, lti)
    except Refused as refused:
        return refusal_page(refused)


@router.get("/jwks")
async def lti_jwks(lti: Lti) -> JSONResponse:
    """This tool's public keys (the signing key and the one before it)."""
    return JSONResponse(await asyncio.to_thread(lti.keys.jwks))


async def accept_launch(request: Request, lti: LtiService) -> Response:
    form = await params_of(request)
    if form.get("error"):
        detail = f"{form['error']}: {form.get('error_description', '')} {RELAUNCH}"
        raise Refused(400, "The LMS did not sign you in", detail)
    if not form.get("id_token") or not form.get("state"):
        raise Refused(400, "The launch is incomplete", "It lacks id_token or state. " + RELAUNCH)
    state = form["state"]
    cookie = request.cookies.get(cookie_name(state))
    if cookie is not None and cookie != state:
        raise Refused(400, "This launch belongs to another sign-in", RELAUNCH)
    take = lti.store.take_state if cookie else lti.store.peek_state
    login = await asyncio.to_thread(take, state)
    if login is None:
        raise Refused(400, "This launch has expired or was used already", RELAUNCH)
    platform = await asyncio.to_thread(lti.store.platform, login.platform_id)
    if platform is None:  # removed from the database since the login began
        raise Refused(403, "This LMS is not registered", ASK_ADMIN)
    if cookie is None:  # an iframe whose browser blocks even partitioned cookies
        return fallback_page(login_again_url(lti.base_url(request), platform, login))
    launch = await validate_launch(form["id_token"], login, platform, lti.platform_keys)
    return await open_launch(launch, lti)


async def open_launch(launch: Launch, lti: LtiService) -> Response:
    exercise_id = launch.exercise or default_exercise().id
    if exercise_id not in catalog():
        detail = f"This link asks for exercise {exercise_id!r}; this grader has "
        detail += ", ".join(catalog()) + ". Ask your instructor to fix the link."
        raise Refused(404, "No such exercise", detail)
    seat = await asyncio.to_thread(lti.store.seat, replace(launch, exercise=exercise_id))
    ends_at = int(time.time() + lti.settings.lti_session_hours * 3600)
    session = Session(
        seat.user_id,
        seat.student,
        launch.name,
        launch.role,
        seat.course_id,
        launch.course_title,
        seat.link_id,
        exercise_id,
        ends_at,
    )
    if launch.role == "instructor":
        await offer_due_date(lti, launch, f"lti:{seat.course_id}", exercise_id)
        return await instructor_view(lti, session)
    code, cookie = await asyncio.to_thread(issue_handoff, lti.keys, session)
    return RedirectResponse(f"/#lti={code}", status_code=303, headers={"Set-Cookie": cookie})


async def offer_due_date(lti: LtiService, launch: Launch, course: str, exercise: str) -> None:
    """The LMS's due date for the link, offered as the term's due date (DueDates): the
    launch's own now, the line item's in the background."""
    await asyncio.to_thread(lti.due_dates.offer, course, exercise, launch.due_at)
    if launch.readable_lineitem is not None:
        platform = await asyncio.to_thread(lti.store.platform, launch.platform_id)
        if platform is not None:
            lti.due_dates.read_later(platform, launch.readable_lineitem, course, exercise)


class SessionInfo(BaseModel):
    name: str
    role: str
    course: str
    exercise: str
    token: str
    expires_at: int
    ends_at: int  # the launch's session cannot be renewed past this
    header: str = SESSION_HEADER


class Handoff(BaseModel):
    code: str


def session_info(keys: ToolKeys, session: Session) -> SessionInfo:
    token, renewed = issue_session(keys, session)
    return SessionInfo(**asdict(renewed), course=renewed.course_title, token=token)


@router.post("/session", response_model=SessionInfo)
async def lti_handoff(body: Handoff, request: Request, lti: Lti) -> SessionInfo:
    """The page's first session, for the handoff code of the launch this browser made."""
    session = await asyncio.to_thread(take_handoff, lti.keys, body.code, request.cookies)
    if session is None:
        detail = "This sign-in link belongs to another browser or has expired. " + RELAUNCH
        raise HTTPException(403, detail)
    return await asyncio.to_thread(session_info, lti.keys, session)


@router.post("/instructor", response_class=HTMLResponse)
async def lti_instructor(request: Request, lti: Lti) -> Response:
    """The instructor view again, after choosing best or latest, or asking to retry."""
    form = await params_of(request)
    session = await asyncio.to_thread(verify_session, lti.keys, form.get("session"))
    if session is None or session.role != "instructor":
        detail = "Your session has expired or is not an instructor's. " + RELAUNCH
        return refusal_page(Refused(403, "Instructors only", detail))
    notice = ""
    if form.get("action") == "policy" and form.get("policy") in ("best", "latest"):
        await asyncio.to_thread(lti.store.set_policy, session.course_id, form["policy"])
        notice = f"The gradebook now gets each student's {form['policy']} score."
    elif form.get("action") == "retry":
        count = await asyncio.to_thread(Outbox(lti.store).retry_failed, session.course_id)
        lti.passback.wake()
        notice = f"{count} score(s) will be posted again."
    return await instructor_view(lti, session, notice)


async def instructor_view(lti: LtiService, session: Session, notice: str = "") -> HTMLResponse:
    token, _ = await asyncio.to_thread(issue_session, lti.keys, session)
    policy = await asyncio.to_thread(lti.store.course_policy, session.course_id)
    rows = await asyncio.to_thread(Outbox(lti.store).course_rows, session.course_id)
    return instructor_page(session.course_title, policy, rows, token, notice)


async def lti_session(
    request: Request,
    x_lti_session: Annotated[str | None, Header(description="The launch's session token.")] = None,
) -> Session:
    session = await asyncio.to_thread(verify_session, get_lti(request).keys, x_lti_session)
    if session is None:
        raise HTTPException(401, EXPIRED)
    return session


LtiSession = Annotated[Session, Depends(lti_session)]


@api_router.get("/session", response_model=SessionInfo)
async def lti_renew(request: Request, session: LtiSession) -> SessionInfo:
    return await asyncio.to_thread(session_info, get_lti(request).keys, session)


@api_router.post(
    "/submit", response_model=SubmissionView, responses={202: {"description": "Poll."}}
)
async def lti_submit(
    body: RunRequest, request: Request, session: LtiSession, service: Service, response: Response
) -> SubmissionView:
    """Grade every tier; once graded, the course's score is posted to the LMS. The
    service's own Submit (intake.accept); the one addition is the outbox row, written in
    the submission's transaction."""
    if body.exercise not in (None, session.exercise):
        raise HTTPException(422, f"This link opens exercise {session.exercise!r} only.")
    outbox_row = row_writer(session.user_id, session.link_id)
    intake = Intake("submit", body.code, session.exercise, session.student, also=outbox_row,
                    shown_name=session.name, course=f"lti:{session.course_id}")  # fmt: skip
    view = await accept(service, response, intake)
    if view.status in ("done", "ungradable"):
        get_lti(request).passback.wake()
    return view


@api_router.get("/submissions", response_model=SubmissionList)
async def lti_submissions(session: LtiSession, service: Service) -> SubmissionList:
    listed = service.store.list_submissions
    found = await asyncio.to_thread(listed, session.student, session.exercise)
    rows = await asyncio.to_thread(credited_rows, service.store, found)
    items = [SubmissionItem.model_validate(row) for row in rows]
    return SubmissionList(student=session.name, submissions=items)


@api_router.get("/submissions/{submission_id}", response_model=SubmissionView)
async def lti_submission(submission_id: str, session: LtiSession, service: Service):
    get = service.store.get
    found = await asyncio.to_thread(get, submission_id) if is_id(submission_id) else None
    if found is None or found.submission.student != session.student:
        raise HTTPException(404, "No submission with this id is visible to you.")
    return await view_of(service, found, session.name)
