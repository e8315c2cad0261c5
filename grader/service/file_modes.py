"""The data folder is private to the service's user: the folder 0700, every file in it 0600.

It holds every student's code and the LTI and session keys. `make_private` runs at start-up:
a umask of 077 for every file made from then on, and a chmod of what is there already;
`wider_than_private` lists what others can still reach (for `doctor` and /healthz).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def make_private(data_dir: Path) -> None:
    os.umask(0o077)
    data_dir.mkdir(parents=True, exist_ok=True)
    for path in (data_dir, *data_dir.iterdir()):
        if not path.is_symlink():
            path.chmod(0o700 if path.is_dir() else 0o600)


def wider_than_private(data_dir: Path) -> list[str]:
    """A line per entry another user can reach: the folder and what sits directly in it (a
    private folder hides everything below)."""
    found = []
    for path in (data_dir, *data_dir.iterdir()) if data_dir.is_dir() else ():
        mode, wanted = stat.S_IMODE(path.lstat().st_mode), 0o700 if path.is_dir() else 0o600
        if mode & 0o077 and not path.is_symlink():
            found.append(
                f"{path} is {mode:04o}, open to other local users; expected {wanted:04o} "
                f"(chmod {wanted:o} {path})"
            )
    return found
