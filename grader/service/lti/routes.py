"""The LMS-facing endpoints: GET|POST /lti/login, POST /lti/launch, GET /lti/jwks, and the
instructor view (POST /lti/instructor).

Whatever a login or launch gets wrong is answered with a page that says so and a 4xx status
(a 502 when the LMS itself could not be reached), never a 500. A student's launch ends in a
redirect to the page with a session token in the address's fragment (never sent to a
server, never in a Referer); an instructor's launch answers with the instructor view.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from grader.exercise import catalog, default_exercise
from grader.service.lti.launch import Launch, exercise_of, validate_launch
from grader.service.lti.login import cookie_name, login_again_url, start_login
from grader.service.lti.outbox import Outbox
from grader.service.lti.pages import fallback_page, instructor_page, refusal_page
from grader.service.lti.refusal import ASK_ADMIN, RELAUNCH, Refused
from grader.service.lti.service import Lti, LtiService
from grader.service.lti.session import Session, issue, verify
from grader.service.lti.store import Entry

router = APIRouter(prefix="/lti", tags=["lti"])
MAX_FORM_BYTES = 64 * 1024  # an id_token is a few KiB


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
async def login(request: Request, lti: Lti) -> Response:
    """OIDC login initiation: redirect to the LMS's authorisation endpoint."""
    try:
        params = await params_of(request)
        launch_url = lti.base_url(request) + "/lti/launch"
        return await asyncio.to_thread(start_login, lti.store, params, launch_url)
    except Refused as refused:
        return refusal_page(refused)


@router.post("/launch", response_class=HTMLResponse)
async def launch(request: Request, lti: Lti) -> Response:
    """The LMS's form post with the id_token: validate it, then open the exercise."""
    try:
        return await accept_launch(request, lti)
    except Refused as refused:
        return refusal_page(refused)


@router.get("/jwks")
async def jwks(lti: Lti) -> JSONResponse:
    """This tool's public keys (the signing key and the one before it)."""
    return JSONResponse(await asyncio.to_thread(lti.keys.jwks))


async def accept_launch(request: Request, lti: Lti) -> Response:
    form = await params_of(request)
    if form.get("error"):
        detail = f"{form['error']}: {form.get('error_description', '')} {RELAUNCH}"
        raise Refused(400, "The LMS did not sign you in", detail)
    if not form.get("id_token") or not form.get("state"):
        raise Refused(400, "The launch is incomplete", "It lacks id_token or state. " + RELAUNCH)
    state = form["state"]
    cookie = request.cookies.get(cookie_name(state))
    if cookie is None:
        return await fallback(request, lti, state)
    if cookie != state:
        raise Refused(400, "This launch belongs to another sign-in", RELAUNCH)
    login = await asyncio.to_thread(lti.store.take_state, state)
    if login is None:
        raise Refused(400, "This launch has expired or was used already", RELAUNCH)
    platform = await asyncio.to_thread(lti.store.platform, login.platform_id)
    if platform is None:  # removed from the database since the login began
        raise Refused(403, "This LMS is not registered", ASK_ADMIN)
    accepted = await validate_launch(form["id_token"], login, platform, lti.platform_keys)
    return await open_launch(accepted, lti)


async def fallback(request: Request, lti: LtiService, state: str) -> Response:
    login = await asyncio.to_thread(lti.store.peek_state, state)
    if login is None:
        raise Refused(400, "This launch has expired or was used already", RELAUNCH)
    platform = await asyncio.to_thread(lti.store.platform, login.platform_id)
    return fallback_page(login_again_url(lti.base_url(request), platform, login))


async def open_launch(launch: Launch, lti: LtiService) -> Response:
    exercise_id = exercise_of(launch) or default_exercise().id
    exercise = catalog().get(exercise_id)
    if exercise is None:
        known = ", ".join(catalog())
        detail = f"This link asks for exercise {exercise_id!r}; this grader has {known}."
        raise Refused(404, "No such exercise", detail + " Ask your instructor to fix the link.")
    entry = Entry(
        platform_id=launch.platform.platform_id,
        deployment_id=launch.deployment_id,
        sub=launch.sub,
        name=launch.name,
        context_id=launch.context_id,
        course_title=launch.course_title,
        resource_link_id=launch.resource_link_id,
        link_title=launch.link_title,
        exercise=exercise.id,
        lineitem=launch.lineitem,
    )
    seat = await asyncio.to_thread(lti.store.seat, entry)
    session = Session(
        seat.user_id,
        seat.student,
        launch.name,
        launch.role,
        seat.course_id,
        launch.course_title,
        seat.link_id,
        exercise.id,
    )
    token, _ = await asyncio.to_thread(issue, lti.keys, session)
    if launch.role == "instructor":
        return await instructor_view(lti, session, token)
    return RedirectResponse(f"/#lti={token}", status_code=303)


async def instructor_view(
    lti: LtiService, session: Session, token: str, notice: str = ""
) -> HTMLResponse:
    course = await asyncio.to_thread(lti.store.course, session.course_id)
    rows = await asyncio.to_thread(Outbox(lti.store).course_rows, session.course_id)
    return instructor_page(session.course_title, course["policy"], rows, token, notice)


@router.post("/instructor", response_class=HTMLResponse)
async def instructor(request: Request, lti: Lti) -> Response:
    """The instructor view again, after choosing best or latest, or asking to retry."""
    form = await params_of(request)
    session = await asyncio.to_thread(verify, lti.keys, form.get("session"))
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
    token, _ = await asyncio.to_thread(issue, lti.keys, session)
    return await instructor_view(lti, session, token, notice)
