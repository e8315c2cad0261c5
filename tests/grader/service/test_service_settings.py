"""Settings fail fast with a message that names the variable; defaults land in the data dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.service import SettingsError, load_settings

pytestmark = pytest.mark.service


def test_defaults_put_the_database_in_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("GSPO_GRADER_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert settings.data_dir == tmp_path
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'grader.sqlite3'}"
    assert settings.instructor_token is None and settings.max_code_bytes == 64 * 1024


def test_environment_values_are_read_with_the_prefix(monkeypatch):
    monkeypatch.setenv("GSPO_GRADER_POOL_SIZE", "5")
    monkeypatch.setenv("GSPO_GRADER_INSTRUCTOR_TOKEN", "a-long-enough-token-0123456789abcdef")
    settings = load_settings(data_dir=Path("/tmp/x"))
    assert settings.pool_size == 5
    assert settings.instructor_token.get_secret_value() == "a-long-enough-token-0123456789abcdef"
    assert "a-long-enough-token-0123456789abcdef" not in repr(settings)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("GSPO_GRADER_POOL_SIZE", "zero"),
        ("GSPO_GRADER_MAX_QUEUE", "-1"),
        ("GSPO_GRADER_PORT", "70000"),
        ("GSPO_GRADER_INSTRUCTOR_TOKEN", "s" * 31),
        ("GSPO_GRADER_LOG_LEVEL", "loud"),
        ("GSPO_GRADER_DATABASE_URL", "mysql://localhost/grader"),
    ],
)
def test_bad_values_stop_start_up_naming_the_variable(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=variable):
        load_settings()
