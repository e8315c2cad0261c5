"""Student names as the grader compares and stores them: one spelling per person.

`normal_name` applies Unicode NFKC, case-folds, trims and collapses inner whitespace, so
`Alice`, ` alice ` and `ａｌｉｃｅ` (full width) are one student. `scripts` names the writing
systems of a name's letters: a name that mixes two (`аlice`, Cyrillic а among Latin letters)
can pass for someone else's in the gradebook and is refused where a name enters.
"""

from __future__ import annotations

import unicodedata

# Scripts that one name may legitimately mix (Japanese writes kanji with kana; Korean may
# add hanja); each group counts as one script.
SCRIPT_GROUPS = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK"}


def normal_name(name: str) -> str:
    """NFKC, case-folded, trimmed, runs of whitespace made one space."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return " ".join(folded.split())


def scripts(name: str) -> list[str]:
    """The scripts of the name's letters, sorted (e.g. ['CYRILLIC', 'LATIN'])."""
    found = set()
    for char in name:
        if unicodedata.category(char).startswith("L"):
            script = unicodedata.name(char, "UNKNOWN").split()[0]
            found.add(SCRIPT_GROUPS.get(script, script))
    return sorted(found)


def mixed_scripts_message(name: str) -> str | None:
    """Why `name` is refused, or None when its letters are of one script."""
    found = scripts(name)
    if len(found) < 2:
        return None
    return (
        f"The name {name!r} mixes letters of {len(found)} scripts ({', '.join(found).title()}); "
        "write it in one script, so that it cannot pass for another student's name."
    )
