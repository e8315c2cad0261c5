"""The instructor page in Chromium, on a class seeded with the DPO exercise's own wrong and
correct implementations under made-up names: each wrong implementation's group is labelled
with its own name, the plots and tables show the class's numbers, and the page is reached
and worked with the keyboard.

Each corpus file is graded once for the module (the judge is slow on a shared machine);
the class is written through the store with those reports, and the known mistakes'
signatures are saved from the same reports, as the service would have graded them.
"""

from __future__ import annotations

import sys

import pytest
from page_server import CHROMIUM, REPO, _build_page

sys.path.insert(0, str(REPO / "tests" / "grader" / "service"))
sys.path.insert(0, str(REPO / "tests" / "grader" / "service" / "lti"))
import math
import re

from class_seed import seed
from fake_lms import CLAIM, FakeLms, register
from servers import LaunchBrowser, ServerThread
from service_fakes import FakeDrawer, FakeGrader
from service_kit import TOKEN

from grader.exercise import catalog
from grader.judge import grade_files
from grader.mistakes import Signatures, failing_tests, known_mistakes
from grader.service import create_app, load_settings
from grader.store import open_store

pytestmark = pytest.mark.browser

DPO = catalog()["dpo"]
WRONG = sorted(path.stem for path in (DPO.corpus / "wrong").glob("*.py"))  # every one
CORRECT = ["logsigmoid", "softplus"]


@pytest.fixture(scope="module")
def graded():
    """The report of every wrong corpus file and of two correct ones, each graded once."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package")
    files = [("wrong", n) for n in WRONG] + [("correct", n) for n in CORRECT]
    paths = [DPO.corpus / kind / f"{name}.py" for kind, name in files]
    reports = grade_files(paths, exercise="dpo")
    pairs = zip(paths, reports, strict=True)
    return dict(zip([n for _, n in files], pairs, strict=True))


@pytest.fixture(scope="module")
def service(graded, tmp_path_factory):
    """The service (its grader a fake: nothing is graded while the page is read) on a
    class of made-up students: two per wrong implementation, one per correct one."""
    _build_page()
    data_dir = tmp_path_factory.mktemp("instructor")
    store = open_store(f"sqlite:///{data_dir / 'grader.sqlite3'}", migrate=True)
    students = {}
    for n, (name, (path, report)) in enumerate(graded.items()):
        copies = 2 if name in WRONG else 1
        students[name] = [f"student-{n:02d}-{c}" for c in range(copies)]
        for student in students[name]:
            seed(store, student, report, n, code=path.read_text())
    store.close()
    found = {n: failing_tests(graded[n][1]) for n in WRONG}
    Signatures(data_dir / "mistakes").save(DPO, found)
    settings = load_settings(data_dir=data_dir, instructor_token=TOKEN)
    server = ServerThread("127.0.0.1")
    app = create_app(settings, FakeGrader(), FakeDrawer())  # the fake reports' fake plots
    server.start(app)
    yield server.base, students
    server.stop()


def test_each_wrong_implementation_is_named_with_its_students(browser, service, graded):
    base, students = service
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{base}/instructor")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "token"
    page.get_by_label("Instructor token").fill("wrong-token-0123456789")
    page.get_by_label("Exercise").select_option("dpo")
    page.keyboard.press("Enter")
    page.get_by_text("The server answered 401").wait_for()
    page.get_by_label("Instructor token").fill(TOKEN)
    page.get_by_role("button", name="Show").click()
    page.locator("#mistakes article").first.wait_for()
    titles = {m.name: m.title for m in known_mistakes(DPO)}
    for name in WRONG:
        group = page.locator("#mistakes article", has_text=titles[name])
        assert group.count() == 1, f"{name}: no group named {titles[name]!r}"
        text = group.inner_text()
        assert all(student in text for student in students[name]), text
        if "One submission" not in text:  # past the largest groups: fetched when asked
            group.get_by_role("button", name="Show one submission").click()
            group.get_by_text("One submission", exact=True).wait_for()
        assert "The reference" in group.inner_text()
        shown = group.locator("pre").first.inner_text().strip()  # the code of a group member
        same = [n for n in WRONG if titles[n] in text]  # files with the same failing tests
        assert any(graded[n][0].read_text().strip() == shown for n in same), (name, same)
    numbers = page.locator("#numbers").inner_text()
    assert numbers.startswith(f"{len(WRONG) * 2 + len(CORRECT)} students")
    assert f"{len(CORRECT)} of {len(WRONG) * 2 + len(CORRECT)} graded students passed" in numbers
    plot = page.locator("#distribution svg").get_attribute("aria-label")
    top = sum(  # students whose score is 90 % of the maximum or more
        len(students[n])
        for n, (_, report) in graded.items()
        if report.score >= 0.9 * report.max_score
    )
    assert f"90–100%: {top}" in plot
    rows = page.locator("#items tbody tr")
    assert rows.count() > 5
    failing = {n: failing_tests(report) for n, (_, report) in graded.items()}
    everyone = sum(map(len, students.values()))
    for row in range(rows.count()):  # each test's share, as the class's reports give it
        test, now = rows.nth(row).locator("td").nth(1), rows.nth(row).locator("td").nth(3)
        fail = sum(len(students[n]) for n in graded if test.inner_text() in failing[n])
        assert now.inner_text() == f"{math.floor(100 * fail / everyone + 0.5)}%", test.inner_text()
    assert page.locator("#stuck").inner_text().count("No student is stuck") == 1
    with page.expect_download() as download:
        page.get_by_role("button", name="Download mistakes.csv").click()
    assert download.value.suggested_filename == "mistakes.csv"
    term_sections_work(page)
    assert not errors, errors
    page.close()


def term_sections_work(page) -> None:
    """Schedule and quota saved through the course routes, and a regrade previewed (the
    fake grader grades it) and applied."""
    term = page.locator("#term")
    term.get_by_label("Due at", exact=True).fill("2026-12-20T23:59:00+00:00")
    term.get_by_label("Counted submission").select_option("latest")
    held = []  # the term's read after the save, held back as on a loaded machine
    page.route("**/api/instructor/course?*", lambda route: held.append(route))
    term.get_by_role("button", name="Save schedule").click()
    for _ in range(600):  # the page reads the term back after the save (30 s at most)
        if held:
            break
        page.wait_for_timeout(50)
    assert held, "the page never read the term back after saving the schedule"
    # "Saved" comes only once the forms show what was saved (it came before, and a form
    # filled in that moment was replaced by an empty one: CI saved a quota of 0)
    assert "Saved" not in page.locator("#status").inner_text()
    held[0].continue_()
    page.unroute("**/api/instructor/course?*")
    page.get_by_text("Saved the schedule.").wait_for()
    assert term.get_by_label("Due at", exact=True).input_value().startswith("2026-12-20T23:59")
    assert term.get_by_label("Counted submission").input_value() == "latest"
    term.get_by_label("Submits", exact=True).fill("3")
    term.get_by_label("Per seconds").fill("3600")
    term.get_by_role("button", name="Save quota").click()
    page.get_by_text("Saved the quota.").wait_for()
    assert term.get_by_label("Submits", exact=True).input_value() == "3"
    term.get_by_role("button", name="Preview regrade").click()
    page.get_by_text("Old and new score per student").wait_for(timeout=60_000)
    assert term.locator("#regrade tbody tr").count() >= len(WRONG) * 2
    term.get_by_role("button", name="Apply").click()
    page.get_by_text("The regrade is applied").wait_for()


@pytest.fixture
def lti_tool(tmp_path):
    """The service with the fake LMS registered (no instructor token is set: the launch is
    the only way in), and the fake LMS; an instructor's launch gives the page's session."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package")
    _build_page()
    lms_server, tool_server = ServerThread("127.0.0.2"), ServerThread("127.0.0.1")
    lms = FakeLms(lms_server.base)
    lms_server.start(lms.app())
    register(lms, tmp_path / "data")
    settings = load_settings(data_dir=tmp_path / "data", public_url=tool_server.base)
    tool_server.start(create_app(settings, FakeGrader(), FakeDrawer()))
    lms.tool_base = tool_server.base
    yield tool_server.base, lms
    tool_server.stop()
    lms_server.stop()


def test_an_lti_instructor_launch_reaches_the_page_and_its_term_forms(browser, lti_tool):
    base, lms = lti_tool
    lms.claims = {CLAIM + "custom": {"due_at": "2026-12-18T23:59:00+00:00"}}  # the link's
    launcher = LaunchBrowser(lms)
    view = launcher.launch("teacher-1")
    launcher.close()
    link = re.search(r'href="(/instructor#lti=[^"]+)"', view.text).group(1)
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(base + link)
    page.get_by_text("Statistics of gspo.").wait_for()
    assert page.locator("#token-field").is_hidden()  # the launch signs the page in
    course = page.get_by_label("Course").input_value()
    assert course.startswith("lti:") and page.get_by_label("Course").is_editable() is False
    assert page.locator("#numbers").inner_text().startswith("0 students, 0 submissions")
    assert "No submissions yet." in page.locator("#items").inner_text()
    term = page.locator("#term")
    # the LMS's due date is offered in the form, and counts only once saved
    assert term.get_by_label("Due at", exact=True).input_value() == "2026-12-18T23:59:00+00:00"
    assert "it counts once you save" in page.locator("#lms-due").inner_text()
    term.get_by_label("Due at", exact=True).fill("2026-12-20T23:59:00+00:00")
    term.get_by_role("button", name="Save schedule").click()
    page.get_by_text("Saved the schedule.").wait_for()
    assert term.get_by_label("Due at", exact=True).input_value().startswith("2026-12-20T23:59")
    assert "the schedule saved here counts" in page.locator("#lms-due").inner_text()
    term.get_by_label("Submits", exact=True).fill("4")
    term.get_by_label("Per seconds").fill("600")
    term.get_by_role("button", name="Save quota").click()
    page.get_by_text("Saved the quota.").wait_for()
    assert term.get_by_label("Submits", exact=True).input_value() == "4"
    term.get_by_role("button", name="Preview regrade").click()  # nothing graded to regrade
    page.get_by_text("has no graded Submit of 'gspo' to regrade").wait_for()
    assert f"course '{course}'" in page.locator("#status").inner_text()
    assert not errors, errors
    page.close()
