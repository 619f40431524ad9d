"""Scratch folders for work on a report (a decompressed `.ncu-rep.xz`, an `nsys export`).

They live under `$TMPDIR/profkit-<uid>/` (the system temp folder: never beside a report or a
database) and go away on every exit profkit sees: return, error, Ctrl-C, SIGTERM (the CLI turns
it into an exit). A `kill -9` leaves its folder behind; the next profkit to make a folder
removes it. Each folder holds a lock file that its process keeps locked (flock) while it lives:
the kernel drops the lock when the process dies, however it dies, so a folder whose lock can be
taken belongs to nobody (no guessing from process ids, which are reused).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from profkit.core.errors import ProfkitError

LOCK = ".profkit-lock"
LEGACY_PREFIXES = ("profkit-ncu-",)  # folders of profkit before this module (no lock): by age only
LEGACY_AGE_S = 24 * 3600


def root() -> Path:
    """profkit's folder inside the system temp folder ($TMPDIR), one per user."""
    return Path(tempfile.gettempdir()) / f"profkit-{os.getuid()}"


def _owned(folder: Path) -> bool:
    """True while a live process holds the folder's lock."""
    try:
        fd = os.open(folder / LOCK, os.O_RDWR)
    except FileNotFoundError:
        # made a moment ago and not locked yet, or a folder someone else put here: by age
        try:
            return time.time() - folder.stat().st_mtime < 60
        except OSError:
            return False
    except OSError:
        return True  # cannot even look: leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # (closing drops the lock we may have taken)
    return False


def clean_stale() -> list[str]:
    """Remove the folders of profkit processes that died without cleaning up (kill -9, power
    loss). Returns what was removed. Cheap: one lock attempt per folder."""
    removed = []
    base = root()
    if base.is_dir():
        for folder in base.iterdir():
            if folder.is_dir() and not folder.is_symlink() and not _owned(folder):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(str(folder))
    tmp = Path(tempfile.gettempdir())
    try:
        legacy = [p for p in tmp.iterdir() if p.name.startswith(LEGACY_PREFIXES)]
    except OSError:
        legacy = []
    for folder in legacy:
        try:
            st = folder.lstat()
        except OSError:
            continue
        if (
            folder.is_dir()
            and not folder.is_symlink()
            and st.st_uid == os.getuid()
            and time.time() - st.st_mtime > LEGACY_AGE_S
        ):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


@contextmanager
def workdir(prefix: str = "work"):
    """A fresh private folder (mode 700) under root(), removed when the block exits."""
    base = root()
    base.mkdir(mode=0o700, exist_ok=True)
    st = base.lstat()
    if not base.is_dir() or base.is_symlink() or st.st_uid != os.getuid():
        # someone else made it (a shared /tmp): never work inside another user's folder
        raise ProfkitError(f"{base}: not a folder of this user; set TMPDIR to a private folder")
    clean_stale()
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}-{os.getpid()}-", dir=base))
    # the lock file appears under its name only once locked: a profkit starting beside this one
    # must never find it unlocked (it would take the folder for a dead process's and remove it;
    # parallel ingests hit that window). Until the rename the folder is young, which counts as owned.
    fd = os.open(folder / (LOCK + ".new"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(folder / (LOCK + ".new"), folder / LOCK)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)


def free_bytes(folder: Path) -> int:
    return shutil.disk_usage(folder).free


_PROCESS_DIR: list = []


def process_dir() -> Path:
    """A private folder that lives as long as this process (removed at exit, or by the next
    profkit's clean_stale after a kill): for files a parse hands to a later write, such as an
    unpacked report the store attaches."""
    if not _PROCESS_DIR:
        ctx = workdir("proc")
        folder = ctx.__enter__()
        atexit.register(ctx.__exit__, None, None, None)
        _PROCESS_DIR.append(folder)
    return _PROCESS_DIR[0]
