"""gspo-grader: a sandboxed, tiered grader for paper-to-code exercises (any exercise folder).

Pipeline stages, one subpackage each:
    sandbox/  runs the student's module in an isolated worker behind a remote-autograd proxy
    judge/    runs the tier suites (ordinary pytest files) against that proxy
    report/   the versioned report model and its writers (JSON, Gradescope, JUnit, CSV, text)
    service/  the HTTP API and the web page
"""

__version__ = "0.1.0"
