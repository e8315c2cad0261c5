"""exercise.toml's optional [corpus] table: the corpus size check-exercise --corpus expects."""

from __future__ import annotations

import re
import shutil

import pytest

from grader.exercise import REPO_ROOT, ExerciseError, catalog, load_exercise


def test_each_exercise_states_its_corpus_size():
    assert {e.id: e.corpus_counts for e in catalog().values()} == {
        "gspo": (19, 71),
        "dpo": (10, 46),
    }


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ("[corpus]\ncorrect = 3\n", "[corpus] is missing field(s): wrong"),
        ("[corpus]\ncorrect = 3\nwrong = -1\n", "correct and wrong must be counts >= 0"),
        ("[corpus]\ncorrect = 3\nwrong = 2\nstubs = 1\n", "has unknown field(s): stubs"),
    ],
)
def test_a_bad_corpus_table_is_refused_with_the_field(tmp_path, table, words):
    folder = tmp_path / "dpo"
    shutil.copytree(REPO_ROOT / "exercises" / "dpo", folder, ignore=shutil.ignore_patterns("tests"))
    manifest, declared = folder / "exercise.toml", "[corpus]\ncorrect = 10\nwrong = 46\n"
    text = manifest.read_text()
    assert declared in text
    manifest.write_text(text.replace(declared, table))
    with pytest.raises(ExerciseError, match=re.escape(words)):
        load_exercise(folder)
    manifest.write_text(text.replace(declared, ""))
    assert load_exercise(folder).corpus_counts is None
