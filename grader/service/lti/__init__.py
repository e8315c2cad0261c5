"""The tool side of LTI 1.3 core and Assignment and Grade Services: courses launch the
grader from their LMS, and Submit scores go back to the LMS's gradebook.

    LMS --login initiation--> /lti/login    registration by (issuer, client id); state and
                                            nonce stored, a partitioned cookie set
        <--redirect to the LMS's authorisation URL
    LMS --form post id_token--> /lti/launch validated (launch.py); the user, course and link
                                            found or created; a session token for the page
    page --X-LTI-Session--> /api/lti/*      Submit; its outbox row written with it
    passback.py --AGS score--> LMS          per course: best or latest; retried; refusals kept

Modules: tables (schema), store and outbox (queries), keys (this tool's keys), platform_keys
(the LMSs' key sets), login, launch, roles, session, ags (token and score), passback (the
drainer), routes and api (HTTP), pages (HTML), service (what the app holds), cli.
"""
