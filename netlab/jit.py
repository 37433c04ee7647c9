"""``njit`` that imports numba at the first kernel call, not when a module defining kernels is imported.

Why: importing numba costs about 0.2 s of CPU, more than a 500-job simulation on the ideal network takes,
and most processes (``netlab --help``, a run on the ideal network, a notebook reading results) never call a
compiled kernel. Modules write ``from ..jit import njit`` and decorate as they would with numba's.

Until the first call a kernel is a :class:`Kernel` placeholder. The first call of any kernel imports numba,
makes every placeholder a real numba dispatcher (with the options it was declared with; nothing is compiled
before a dispatcher is first called, as with numba itself) and puts the dispatchers in place of the
placeholders in the namespaces of the loaded netlab modules: a kernel that calls another kernel then finds a
dispatcher there, as numba needs, and Python callers call numba directly. Kernels declared after that are
numba's own dispatchers. A reference held elsewhere (a test's ``from ... import _kernel``) still works through
the placeholder, at the cost of one Python call.
"""

from __future__ import annotations

import functools
import sys
import threading

_numba = None  # the numba module, once a kernel was called
_pending: list["Kernel"] = []
_lock = threading.Lock()  # two threads calling their first kernels at once materialise once


class Kernel:
    """A kernel declared before numba was imported; calling it compiles it (and its peers) with numba."""

    def __init__(self, func, options: dict):
        functools.update_wrapper(self, func)
        self.py_func = func
        self.options = options
        self.dispatcher = None

    def __call__(self, *args, **kwargs):
        if self.dispatcher is None:
            _materialise()
        return self.dispatcher(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<netlab.jit.Kernel {self.__qualname__}{' (compiled)' if self.dispatcher is not None else ''}>"


def njit(*args, **options):
    """``numba.njit``, imported lazily: ``@njit`` or ``@njit(cache=True, ...)``."""
    if args and callable(args[0]) and len(args) == 1 and not options:
        return njit()(args[0])

    def decorate(func):
        if _numba is not None:
            return _numba.njit(**options)(func)
        kernel = Kernel(func, options)
        _pending.append(kernel)
        return kernel

    return decorate


def _materialise() -> None:
    """Import numba, make every pending kernel a dispatcher, and swap the dispatchers into netlab's modules."""
    import numba

    with _lock:
        if _numba is None:
            _swap(numba)


def _swap(numba) -> None:
    global _numba
    from numba.core import caching

    from .numba_cache import install_locator

    install_locator(caching)  # before any dispatcher exists: a kernel's cache stamp covers the kernels it calls
    _numba = numba
    for kernel in _pending:
        kernel.dispatcher = numba.njit(**kernel.options)(kernel.py_func)
    _pending.clear()
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "netlab" or name.startswith("netlab.")):
            continue
        namespace = vars(module)
        for key, value in list(namespace.items()):
            if isinstance(value, Kernel):
                namespace[key] = value.dispatcher
