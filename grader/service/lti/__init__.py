"""The tool side of LTI 1.3 core and Assignment and Grade Services: courses launch the
grader from their LMS, and Submit scores go back to the LMS's gradebook (docs/lti.md).

    LMS --login initiation--> /lti/login    registration by (issuer, client id); state and
                                            nonce stored, a partitioned cookie set
        <--redirect to the LMS's authorisation URL
    LMS --form post id_token--> /lti/launch validated; the user, course and link found or
                                            created; a handoff code for the page
    page --code--> /lti/session             the session token, for the launching browser
    page --X-LTI-Session--> /api/lti/*      Submit; its outbox row written with it
    drainer --AGS score--> LMS              per course: best or latest; retried; refusals kept

Modules: rows (tables and store), credentials (this tool's keys, session tokens), launches
(login, key sets, id_token, roles), scores (outbox, AGS, drainer), routes (HTTP,
LtiService, the LMS's due dates), pages (HTML), commands (the CLI).
"""

from grader.service.lti.credentials import ToolKeys
from grader.service.lti.launches import role_of
from grader.service.lti.routes import LtiService, api_router, router
from grader.service.lti.rows import (
    Launch,
    LoginState,
    LtiStore,
    later,
    lti_courses,
    lti_links,
    lti_platforms,
    lti_scores,
    lti_users,
    row_writer,
)
from grader.service.lti.scores import Outbox

routers = (router, api_router)
__all__ = ["Launch", "LoginState", "LtiService", "LtiStore", "Outbox", "ToolKeys"]
__all__ += ["later", "role_of", "routers", "row_writer"]
__all__ += ["lti_courses", "lti_links", "lti_platforms", "lti_scores", "lti_users"]  # its tables
