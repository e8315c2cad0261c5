"""The data folder is private to the service's user: the folder 0700, every file in it 0600.

It holds every student's code, the LTI signing key and the session key, so any other local
user who could read it could read the code and forge sessions. `make_private` runs at start-up
(service and grading node): a umask of 0o077 for every file made from then on, and a chmod of
what is already there; `wider_than_private` lists what is still readable by others, for
`gspo-grader doctor` and /healthz.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077


def make_private(data_dir: Path) -> None:
    """Umask 0o077 from now on; create `data_dir` 0700, and take group and other access away
    from it and from the files directly inside it."""
    os.umask(PRIVATE_UMASK)
    data_dir.mkdir(parents=True, exist_ok=True)
    data_dir.chmod(0o700)
    for entry in data_dir.iterdir():
        if entry.is_file() or entry.is_dir():
            entry.chmod(0o700 if entry.is_dir() else 0o600)


def wider_than_private(data_dir: Path) -> list[str]:
    """One line per entry that a user other than the owner can reach: the folder itself and
    what sits directly in it (a private folder hides everything below it)."""
    if not data_dir.is_dir():
        return []
    found = []
    for path in (data_dir, *sorted(data_dir.iterdir())):
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077 and not path.is_symlink():
            wanted = 0o700 if path.is_dir() else 0o600
            found.append(
                f"{path} is {mode:04o}, open to other local users; expected {wanted:04o} "
                f"(chmod {wanted:o} {path})"
            )
    return found
