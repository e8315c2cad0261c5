"""One router per resource: exercise, grading (run, submit), submissions, reports (plots),
instructor, health (healthz, metrics)."""
