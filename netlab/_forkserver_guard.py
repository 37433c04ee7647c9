"""Imported by the forkserver when it starts (see :func:`netlab.procguard.guard_forkserver`): it then dies with
its parent, and the kernel takes the workers it forked with it (each asks for the same in its initializer).

Imported anywhere else it does nothing: only the import made by ``multiprocessing.forkserver.main`` counts.
"""

import sys

from .procguard import die_with_parent


def _in_forkserver() -> bool:
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back
    return False


if _in_forkserver():
    die_with_parent()
