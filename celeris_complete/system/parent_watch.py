"""Ending a process when the one that started it is gone (an editor that crashed, a server killed)."""

from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger(__name__)


def exit_with_parent(pid: int, code: int = 0, direct: bool = False, every_s: float = 2.0) -> None:
    """A daemon thread that ends this process with ``code`` once process ``pid`` has ended. ``direct``:
    ``pid`` is this process's own parent, so being re-parented also means it is gone (even when its
    pid has been reused)."""

    def watch() -> None:
        while True:
            time.sleep(every_s)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:
                pass  # it exists, owned by someone else
            if direct and os.getppid() != pid:
                break
        log.info("parent process %d is gone; exiting", pid)
        os._exit(code)

    threading.Thread(target=watch, name="celeris-parent-watch", daemon=True).start()
