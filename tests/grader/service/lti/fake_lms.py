"""A fake LMS, written from the LTI 1.3 core, Security Framework and AGS specifications, run
as a real HTTP server on its own loopback address (127.0.0.2: another site than the tool).

    /jwks                 its public keys
    /authorize            OIDC authorisation: checks the tool's login redirect, answers with
                          the auto-submitting form that posts the id_token to the tool
    /token                client credentials: verifies the tool's JWT assertion against the
                          tool's /lti/jwks, each jti once
    /lineitems/{id}/scores  records every score posted (with a valid token)
    /lineitems/{id}       GET: the line item (with a token for a lineitem scope), its
                          `endDateTime` the instance's `lineitem_end` (absent when None)
    /course               a course page that frames the tool's login in an iframe

Faults are set on the instance before a launch: `claims` (replaced or added claims), `drop`
(claims removed), `signing` ("foreign": a key not in /jwks under a published kid;
"unknown_kid": a key nobody published), `scores_status` (e.g. 422), `down` (503 from the
token and score endpoints), `jwks_down` (503 from /jwks).
"""

from __future__ import annotations

import asyncio
import html
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, RSAKey

from grader.cli import main as cli_main

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
ROLES = {
    "student": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"],
    "teacher": [
        "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor",
        "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Faculty",
    ],
}


def new_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"use": "sig", "alg": "RS256"}, auto_kid=True)


class FakeLms:
    def __init__(self, base: str, client_id: str = "gspo-tool", deployment: str = "deploy-1"):
        self.base = base
        self.issuer = base
        self.client_id = client_id
        self.deployment = deployment
        self.tool_base = ""  # set once the tool is started
        self.keys = [new_key()]
        self.reset()

    def reset(self) -> None:
        """Clear faults and records (keys stay)."""
        self.claims: dict = {}
        self.drop: set[str] = set()
        self.signing: str | None = None
        self.scores_status: int | None = None
        self.down = False
        self.jwks_down = False
        self.jwks_fetches = 0
        self.exercise: str | None = None  # the link's target names this exercise
        self.problems: list[str] = []  # what the tool got wrong, as this LMS saw it
        self.nonces: list[str] = []
        self.token_requests: list[dict] = []  # those answered (not while down)
        self.token_attempts = 0
        self.jtis: set[str] = set()
        self.tokens: set[str] = set()
        self.scopes: dict[str, str] = {}  # token -> the scope it was asked for
        self.scores: list[dict] = []  # {"path", "query", "body", "content_type"}
        self.scores_begun = 0  # score posts received, answered or not yet
        self.scores_delay_s = 0.0  # how long the score endpoint takes to answer
        self.lineitem_end: str | None = None  # the line item's endDateTime
        self.lineitem_reads: list[dict] = []  # {"path", "accept"} of each GET answered

    def rotate(self) -> RSAKey:
        """A new signing key, published beside the old one."""
        self.keys.insert(0, new_key())
        return self.keys[0]

    # ---- launches ------------------------------------------------------------------------
    def lineitem(self, item: str = "1") -> str:
        return f"{self.base}/lineitems/{item}?type_id=graded"

    def id_token(self, login_hint: str, nonce: str, target_link_uri: str) -> str:
        role = "teacher" if login_hint.startswith("teacher") else "student"
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": self.client_id,
            "sub": f"user-{login_hint}",
            "exp": now + 300,
            "iat": now,
            "nonce": nonce,
            "name": f"Ada {login_hint.title()}",
            CLAIM + "message_type": "LtiResourceLinkRequest",
            CLAIM + "version": "1.3.0",
            CLAIM + "deployment_id": self.deployment,
            CLAIM + "target_link_uri": target_link_uri,
            CLAIM + "resource_link": {"id": "link-1", "title": "GSPO loss"},
            CLAIM + "roles": ROLES[role],
            CLAIM + "context": {"id": "course-1", "title": "RL from papers"},
            AGS: {
                "scope": [SCORE_SCOPE, "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"],
                "lineitems": f"{self.base}/lineitems",
                "lineitem": self.lineitem(),
            },
        }
        claims.update(self.claims)
        for name in self.drop:
            claims.pop(name, None)
        return self.sign(claims)

    def sign(self, claims: dict) -> str:
        key = self.keys[0]
        kid = key.kid
        if self.signing == "foreign":
            key = new_key()  # same kid as the published key, other private key
        elif self.signing == "unknown_kid":
            key = new_key()
            kid = key.kid
        return jwt.encode({"alg": "RS256", "kid": kid, "typ": "JWT"}, claims, key)

    def check_login(self, q: dict) -> str | None:
        expected = {
            "scope": "openid",
            "response_type": "id_token",
            "response_mode": "form_post",
            "prompt": "none",
            "client_id": self.client_id,
            "redirect_uri": f"{self.tool_base}/lti/launch",
            "lti_message_hint": "hint-for-link-1",
        }
        for name, value in expected.items():
            if q.get(name) != value:
                return f"{name} is {q.get(name)!r}, expected {value!r}"
        for name in ("state", "nonce", "login_hint"):
            if not q.get(name):
                return f"{name} is missing"
        return None

    def target(self) -> str:
        """The link's target link URI, as an instructor configured it."""
        query = f"?exercise={self.exercise}" if self.exercise else ""
        return f"{self.tool_base}/lti/launch{query}"

    def login_url(self, login_hint: str = "student-1") -> str:
        """Where this LMS sends the browser to start a launch (third-party login)."""
        target = self.target()
        params = {
            "iss": self.issuer,
            "client_id": self.client_id,
            "login_hint": login_hint,
            "target_link_uri": target,
            "lti_message_hint": "hint-for-link-1",
            "lti_deployment_id": self.deployment,
        }
        return f"{self.tool_base}/lti/login?{urlencode(params)}"

    # ---- services ------------------------------------------------------------------------
    def verify_assertion(self, form: dict) -> str | None:
        """None when the token request is right; else what is wrong with it."""
        if form.get("grant_type") != "client_credentials":
            return "grant_type"
        if (
            form.get("client_assertion_type")
            != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        ):
            return "client_assertion_type"
        tool_keys = httpx.get(f"{self.tool_base}/lti/jwks", timeout=5).json()
        try:
            token = jwt.decode(form.get("client_assertion", ""), KeySet.import_key_set(tool_keys))
        except (JoseError, ValueError) as error:
            return f"assertion signature: {error}"
        c = token.claims
        if c.get("iss") != self.client_id or c.get("sub") != self.client_id:
            return "assertion iss/sub"
        if c.get("aud") not in (f"{self.base}/token", [f"{self.base}/token"]):
            return f"assertion aud {c.get('aud')!r}"
        if not isinstance(c.get("exp"), int) or c["exp"] < time.time():
            return "assertion expired"
        if not c.get("jti") or c["jti"] in self.jtis:
            return "assertion jti reused"
        self.jtis.add(c["jti"])
        return None

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/jwks")
        def jwks() -> Response:
            self.jwks_fetches += 1
            if self.jwks_down:
                return JSONResponse({"error": "maintenance"}, 503)
            return JSONResponse({"keys": [k.as_dict(private=False) for k in self.keys]})

        @app.get("/authorize")
        def authorize(request: Request) -> Response:
            q = dict(request.query_params)
            problem = self.check_login(q)
            if problem:
                self.problems.append(problem)
                return HTMLResponse(f"bad login request: {html.escape(problem)}", 400)
            self.nonces.append(q["nonce"])
            token = self.id_token(q["login_hint"], q["nonce"], self.target())
            return HTMLResponse(
                auto_post(q["redirect_uri"], {"id_token": token, "state": q["state"]})
            )

        @app.post("/token")
        async def token(request: Request) -> Response:
            self.token_attempts += 1
            if self.down:
                return JSONResponse({"error": "temporarily_unavailable"}, 503)
            form = parse_form(await request.body())
            self.token_requests.append(form)
            problem = self.verify_assertion(form)
            if problem:
                self.problems.append(problem)
                return JSONResponse({"error": "invalid_client", "error_description": problem}, 400)
            access = uuid.uuid4().hex
            self.tokens.add(access)
            self.scopes[access] = form.get("scope", "")
            body = {"access_token": access, "token_type": "Bearer", "expires_in": 3600}
            return JSONResponse({**body, "scope": form.get("scope", "")})

        @app.post("/lineitems/{item}/scores")
        async def scores(item: str, request: Request) -> Response:
            if self.down:
                return JSONResponse({"error": "down"}, 503)
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
            if bearer not in self.tokens:
                return JSONResponse({"error": "bad token"}, 401)
            if self.scores_status is not None:
                return JSONResponse({"error": "This course is not published."}, self.scores_status)
            self.scores_begun += 1
            await asyncio.sleep(self.scores_delay_s)
            self.scores.append(
                {
                    "path": request.url.path,
                    "query": request.url.query,
                    "body": await request.json(),
                    "content_type": request.headers.get("content-type"),
                }
            )
            return Response(status_code=200)

        @app.get("/lineitems/{item}")
        async def lineitem(item: str, request: Request) -> Response:
            bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
            if bearer not in self.tokens or "scope/lineitem" not in self.scopes[bearer]:
                return JSONResponse({"error": "no token for a lineitem scope"}, 401)
            accept = request.headers.get("accept")
            self.lineitem_reads.append({"path": request.url.path, "accept": accept})
            body = {"id": self.lineitem(item), "label": "GSPO loss", "scoreMaximum": 20}
            if self.lineitem_end is not None:
                body["endDateTime"] = self.lineitem_end
            return JSONResponse(body, media_type="application/vnd.ims.lis.v2.lineitem+json")

        @app.get("/course")
        def course(login_hint: str = "student-1") -> HTMLResponse:
            src = html.escape(self.login_url(login_hint))
            page = (
                "<!doctype html><title>Fake LMS course</title><h1>RL from papers</h1>"
                f'<iframe id="tool" title="GSPO exercise" src="{src}" '
                'style="width:1200px;height:900px"></iframe>'
            )
            return HTMLResponse(page)

        return app


def register(lms: FakeLms, data_dir: Path, *extra: str) -> None:
    """Register the fake LMS with the tool as an instructor would: `gspo-grader lti
    add-platform` with its issuer, client, deployment and endpoints."""
    args = ["lti", "add-platform", "--data-dir", str(data_dir), "--issuer", lms.issuer]
    args += ["--client-id", lms.client_id, "--deployment-id", lms.deployment]
    args += ["--auth-url", f"{lms.base}/authorize", "--token-url", f"{lms.base}/token"]
    args += ["--jwks-url", f"{lms.base}/jwks", *extra]
    assert cli_main(args) == 0


def parse_form(body: bytes) -> dict:
    return dict(parse_qsl(body.decode()))


def auto_post(action: str, fields: dict) -> str:
    inputs = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
        for k, v in fields.items()
    )
    return (
        f'<!doctype html><form id="launch" method="post" action="{html.escape(action)}">'
        f"{inputs}</form><script>document.getElementById('launch').submit()</script>"
    )
