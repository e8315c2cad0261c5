"""Alembic's entry point: run the migrations on the connection that database.upgrade opened."""

from alembic import context

from grader.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
