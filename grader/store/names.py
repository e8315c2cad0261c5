"""Student names as the grader compares and stores them: one spelling per person.

`normal_name`: Unicode NFKC, case-folded, trimmed, inner whitespace one space (`Alice`,
` alice ` and `ａｌｉｃｅ` are one student). `mixed_scripts_message`: why a name whose
letters come from two scripts (`аlice`, a Cyrillic а among Latin letters), which could pass
for someone else's in the gradebook, is refused.
"""

from __future__ import annotations

import unicodedata

ONE_SCRIPT = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK"}  # mixed in one name


def normal_name(name: str) -> str:
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    return " ".join(folded.split())


def mixed_scripts_message(name: str) -> str | None:
    letters = [c for c in name if unicodedata.category(c).startswith("L")]
    found = sorted(
        {ONE_SCRIPT.get(s, s) for s in (unicodedata.name(c).split()[0] for c in letters)}
    )
    if len(found) < 2:
        return None
    return (
        f"The name {name!r} mixes letters of {len(found)} scripts ({', '.join(found).title()}); "
        "write it in one script, so that it cannot pass for another student's name."
    )
