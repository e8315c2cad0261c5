"""Alembic migrations of the service's database (run by `gspo-grader db upgrade`)."""
