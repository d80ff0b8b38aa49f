"""Files written atomically: a temporary file in the target's directory, renamed over it once complete, so a
reader never sees half a file and a failure leaves nothing behind. Also the checks and names for the files a
compile writes: an output directory usable before any work is done, file names safe from path characters."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import IO, Callable

from .errors import UserInputError

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


class OutputDirError(UserInputError):
    """An output directory that cannot hold the compile's files; the message names it and the problem."""


def write_atomically(path: str | os.PathLike, write: Callable[[IO], None], *, binary: bool = True) -> Path:
    """Create `path`'s directory, call `write` with an open temporary file beside `path`, then rename it to
    `path` (mode 0666 less the umask, as `open` would create it); on any error the temporary file is removed
    and the error propagates."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def safe_file_stem(name: str) -> str:
    """`name` usable as one file name component: each run of characters other than letters, digits, `_` and `-`
    becomes one `_` (no separators, no `..`, no hidden files)."""
    return _UNSAFE.sub("_", name) or "model"


def usable_output_dir(path: str | os.PathLike) -> Path:
    """`path` with `~` expanded, created if missing; OutputDirError if it is not a writable directory."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise OutputDirError(f"output_dir {str(path)!r} is a file, not a directory; give a directory (it is created "
                             "if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputDirError(f"output_dir {str(path)!r} cannot be created ({e.strerror}); give a writable "
                             "directory") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutputDirError(f"output_dir {str(path)!r} is not writable; give a writable directory")
    return path
