"""This tool's keys: the JWKS, rotation with room for two, the registration CLI, and the
AGS token step checked by another implementation (the lti1p3platform package)."""

from __future__ import annotations

import httpx
import pytest
from test_lti_launch import session_of
from test_lti_passback import PASSING, submit, wait_for

from grader.cli import main as cli_main

pytestmark = pytest.mark.service


def kids(tool) -> list[str]:
    keys = httpx.get(f"{tool.base}/lti/jwks").json()["keys"]
    assert all(set(k) >= {"kty", "n", "e", "kid", "alg", "use"} and "d" not in k for k in keys)
    return [k["kid"] for k in keys]


def test_rotation_publishes_the_new_key_beside_the_previous_one(browser, tool, lms, capsys):
    first = kids(tool)
    assert len(first) == 1
    token = session_of(browser.launch())
    submit(tool, token, PASSING)
    wait_for(lambda: lms.scores)
    assert cli_main(["lti", "rotate-key", "--data-dir", str(tool.data_dir)]) == 0
    second = kids(tool)
    assert len(second) == 2 and second[1] == first[0]
    assert cli_main(["lti", "rotate-key", "--data-dir", str(tool.data_dir)]) == 0
    third = kids(tool)
    assert len(third) == 2 and third[1] == second[0] and first[0] not in third
    lms.tokens.clear()  # the LMS revokes its tokens: a 401, then a new assertion is signed
    submit(tool, token, PASSING + "# again\n")
    wait_for(lambda: len(lms.scores) == 2)
    assert len(lms.token_requests) == 2 and not lms.problems
    signed_with = lms.token_requests[1]["client_assertion"].split(".")[0]
    import base64
    import json

    header = json.loads(base64.urlsafe_b64decode(signed_with + "=" * (-len(signed_with) % 4)))
    assert header["kid"] == third[0]  # the newest key signs
    assert "new signing key" in capsys.readouterr().out


def test_platforms_lists_the_registration_and_the_tools_urls(tool, lms, capsys):
    capsys.readouterr()
    assert cli_main(["lti", "platforms", "--data-dir", str(tool.data_dir)]) == 0
    out = capsys.readouterr().out
    assert lms.issuer in out and "client id gspo-tool" in out and "deploy-1" in out
    assert "/lti/login" in out and "/lti/jwks" in out


def test_add_platform_refuses_a_url_that_is_not_one(tmp_path, capsys):
    args = ["lti", "add-platform", "--data-dir", str(tmp_path), "--issuer", "lms.example"]
    args += ["--client-id", "c", "--deployment-id", "d", "--auth-url", "https://a"]
    args += ["--token-url", "https://t", "--jwks-url", "https://j"]
    assert cli_main(args) == 2
    assert "--issuer must be a full URL" in capsys.readouterr().err


def test_the_token_request_passes_lti1p3platform_validation(browser, tool, lms):
    """The platform side of another implementation checks our client-credentials request:
    its grant and assertion types, and the assertion's RS256 signature against our JWKS."""
    from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
    from lti1p3platform.registration import Registration

    token = session_of(browser.launch())
    submit(tool, token, PASSING)
    wait_for(lambda: lms.token_requests)
    platform_key = lms.keys[0].as_pem(private=True).decode()

    class Platform(LTI1P3PlatformConfAbstract):
        def init_platform_config(self, **kwargs):
            pass

        def get_registration_by_params(self, **kwargs):
            registration = Registration()
            registration.set_iss(lms.issuer).set_client_id(lms.client_id)
            registration.set_platform_private_key(platform_key)
            registration.set_tool_key_set_url(f"{tool.base}/lti/jwks")
            return registration

    platform = Platform()
    platform.get_registration()
    answer = platform.get_access_token(lms.token_requests[0])
    assert answer["scope"] == "https://purl.imsglobal.org/spec/lti-ags/scope/score"
    assert answer["access_token"]
