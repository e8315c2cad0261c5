"""The LTI side's HTML pages, shown inside the LMS's iframe: a refusal, the new-tab
fallback, the instructor view. Written by hand (every value escaped); no script, no cookie.
"""

from __future__ import annotations

from html import escape

from fastapi.responses import HTMLResponse

from grader.service.lti.launches import Refused

STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.3rem;
text-align:left;vertical-align:top}.failed{color:#a40000}.muted{color:#666}"""
STATE_LABELS = {
    "pending": "waiting",
    "sent": "in the gradebook",
    "skipped": "not posted",
    "refused": "refused by the LMS",
    "gave_up": "LMS unreachable",
}


def page(title: str, body: str, status: int = 200) -> HTMLResponse:
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}'
        f" · gspo-grader</title><style>{STYLE}</style></head><body><h1>{escape(title)}</h1>"
        f"{body}</body></html>"
    )
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})


def refusal_page(refused: Refused) -> HTMLResponse:
    return page(refused.title, f'<p role="alert">{escape(refused.detail)}</p>', refused.status)


def fallback_page(login_url: str) -> HTMLResponse:
    """The browser did not send back the login's cookie (an iframe whose browser blocks
    even partitioned cookies): the same login, started again in a tab of its own."""
    body = (
        "<p>Your browser did not keep the short-lived cookie that this sign-in needs "
        "inside the course page.</p>"
        f'<p><a href="{escape(login_url)}" target="_blank" rel="opener">Open the exercise '
        "in a new tab</a> to continue there.</p>"
    )
    return page("Continue in a new tab", body)


def instructor_page(
    course_title: str, policy: str, rows: list, token: str, notice: str = ""
) -> HTMLResponse:
    failures = [r for r in rows if r.state in ("refused", "gave_up")]
    parts = [f"<p class=muted>Instructor view of {escape(course_title or 'this course')}</p>"]
    if notice:
        parts.append(f'<p role="status">{escape(notice)}</p>')
    parts.append(_policy_form(policy, token))
    parts.append(f"<h2>Passback failures ({len(failures)})</h2>")
    if failures:
        parts.append(_table(failures, with_error=True))
        parts.append(_form(token, "retry", "Post the failed scores again"))
    else:
        parts.append("<p>None: every graded score reached the LMS or is on its way.</p>")
    parts.append(f"<h2>Submissions ({len(rows)})</h2>")
    parts.append(_table(rows, with_error=False) if rows else "<p>No submissions yet.</p>")
    return page("Course submissions", "".join(parts))


def _form(token: str, action: str, label: str, extra: str = "") -> str:
    return (
        f'<form method="post" action="/lti/instructor"><input type="hidden" name="session" '
        f'value="{escape(token)}"><input type="hidden" name="action" value="{action}">'
        f"{extra}<button type=submit>{escape(label)}</button></form>"
    )


def _policy_form(policy: str, token: str) -> str:
    options = "".join(
        f'<option value="{p}"{" selected" if p == policy else ""}>{label}</option>'
        for p, label in (("best", "best Submit"), ("latest", "latest Submit"))
    )
    select = f'<label>Gradebook score: <select name="policy">{options}</select></label> '
    return _form(token, "policy", "Save", select)


def _table(rows: list, with_error: bool) -> str:
    head = "<tr><th>Student</th><th>Link</th><th>Submitted</th><th>Score</th><th>Gradebook</th>"
    head += "<th>LMS answer</th></tr>" if with_error else "</tr>"
    body = "".join(_row(r, with_error) for r in rows)
    return f"<table><thead>{head}</thead><tbody>{body}</tbody></table>"


def _row(r, with_error: bool) -> str:
    score = "ungradable" if r.status == "ungradable" else "grading"
    if r.score is not None:
        score = f"{r.score:g} / {r.max_score:g}"
    state = STATE_LABELS.get(r.state, r.state)
    cls = ' class="failed"' if r.state in ("refused", "gave_up") else ""
    cells = [r.name, r.link_title or r.exercise, r.created_at[:19].replace("T", " "), score]
    html = "".join(f"<td>{escape(c)}</td>" for c in cells) + f"<td{cls}>{escape(state)}</td>"
    if with_error:
        html += f"<td>{escape(r.last_error or '')}</td>"
    return f"<tr>{html}</tr>"
