"""Files written atomically: a temporary file in the target's directory, renamed over it once complete, so a
reader never sees half a file and a failure leaves nothing behind."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Callable


def write_atomically(path: str | os.PathLike, write: Callable[[IO], None], *, binary: bool = True) -> Path:
    """Create `path`'s directory, call `write` with an open temporary file beside `path`, then rename it to
    `path`; on any error the temporary file is removed and the error propagates."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
