"""Work the planner runs beside its own search: in a forked process where the platform forks (the work is pure
Python and numpy, which in a thread would take turns with the search for the interpreter lock), else in a
thread. Only the result crosses back (pickled); the work must be deterministic and must not rely on filling
caches the search reads."""
from __future__ import annotations

import multiprocessing
import os
import pickle
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable


class Background:
    """`work()` started now; `result()` waits for its value (or raises its exception). As a context manager, a
    process whose result was not taken (the caller failed first) is stopped on exit, not left holding a copy of
    the compiler's memory. `shares_state`: the work reads state the caller's own search changes (not only fills
    caches of), so without fork it runs in `result()`, after the caller's work, never beside it in a thread."""

    def __init__(self, work: Callable[[], Any], shares_state: bool = False):
        self._process = None
        self._deferred = None
        if hasattr(os, "fork"):
            context = multiprocessing.get_context("fork")
            self._receive, send = context.Pipe(duplex=False)
            self._process = context.Process(target=_run, args=(work, send), daemon=True)
            self._process.start()
            send.close()
        elif shares_state:
            self._deferred = work
        else:
            self._pool = ThreadPoolExecutor(max_workers=1)
            self._future: Future = self._pool.submit(work)

    def __enter__(self) -> "Background":
        return self

    def __exit__(self, *exc) -> None:
        if self._deferred is not None:
            return
        if self._process is None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        elif self._process.is_alive():
            self._process.terminate()
            self._process.join()

    def result(self) -> Any:
        if self._deferred is not None:
            return self._deferred()
        if self._process is None:
            try:
                return self._future.result()
            finally:
                self._pool.shutdown()
        try:
            ok, value = self._receive.recv()
        except EOFError:
            raise RuntimeError(f"the planner's background process ended without a result (exit code "
                               f"{self._process.exitcode})") from None
        finally:
            self._process.join()
            self._receive.close()
        if not ok:
            raise value
        return value


def _run(work: Callable[[], Any], send) -> None:
    """The forked process: `work()`'s value, or its exception, sent back."""
    try:
        message = (True, work())
    except BaseException as error:      # handed to the parent, which raises it
        message = (False, error)
    try:
        send.send(message)
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        send.send((False, RuntimeError(f"the planner's background result could not be sent back: {error}")))
    finally:
        send.close()
