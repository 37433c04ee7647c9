"""Where numba keeps netlab's compiled kernels: never inside an installed copy of the package.

netlab's kernels are ``@njit(cache=True)``. numba's default locator writes the cache
(``*.nbi``/``*.nbc``) into ``__pycache__`` beside the source file whenever that folder
is writable, which for a ``pip install .`` into a virtual environment means
``site-packages/netlab/**/__pycache__``. pip does not know those files: uninstalling
(as ``pip install -e .`` does before the editable install) leaves a
``site-packages/netlab/`` folder without ``__init__.py``, which Python then imports
as a namespace package ahead of the editable install (``cannot import name ... from
'netlab.network' (unknown location)``).

So, when netlab runs from an installed copy (not from a writable source checkout,
where ``__pycache__`` beside the sources is the place numba and Python both use),
:func:`configure` points ``NUMBA_CACHE_DIR`` at a user cache directory,
``$XDG_CACHE_HOME/netlab/numba`` (``~/.cache/netlab/numba``). numba's
``UserProvidedCacheLocator`` then keeps each source folder's cache in a subfolder
named after the folder and a hash of its full path, so two environments never share
an entry, and the index stamps each entry with the source file's hash, so an upgrade
recompiles. The variable is set in the environment, not only in numba's config, so the
sweep's worker processes (which import netlab again) find the kernels the parent
compiled. A ``NUMBA_CACHE_DIR`` the user set is left alone. numba reads the
variable for every cached function of the process: a notebook's own ``cache=True``
functions then cache there too, in their own subfolders.

:func:`configure` runs from ``netlab/__init__.py``, before any kernel module is
imported (numba chooses a function's cache locator when it is decorated); it does not
import numba (about a second on a loaded machine), but updates numba's config when
numba was imported first.

numba stamps each cache entry with its *own* source file only, but a compiled kernel
carries the kernels it calls (and the constants it reads) from other files: after an
edit of ``mean_field.py``, the cached ``resolve_touched`` of ``incremental.py`` would
still run the old mean field, with no error, in a source checkout. So
:func:`install_locator` (called by :mod:`netlab.jit` when numba is first imported)
puts a locator in front of numba's own for netlab's files: the same cache folder as
numba would choose, stamped also with one hash of every kernel module's text
(:func:`kernels_stamp`), so an edit of any kernel module recompiles every kernel.
A constant a kernel reads from a module that declares no kernel is not in the hash.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def in_source_checkout(package_dir: Path = PACKAGE_DIR) -> bool:
    """True when the package is a writable source checkout (its ``pyproject.toml`` beside it): an editable
    install or a run from the repository, where ``__pycache__`` beside the sources is the cache's place."""
    return (package_dir.parent / "pyproject.toml").is_file() and os.access(package_dir, os.W_OK)


def user_cache_dir(environ=os.environ) -> Path:
    """``$XDG_CACHE_HOME/netlab/numba``, else ``~/.cache/netlab/numba``."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netlab" / "numba"


def cache_dir(environ=os.environ, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """Where numba caches netlab's kernels: the user's ``NUMBA_CACHE_DIR`` if set, None (numba's default,
    ``__pycache__`` beside the sources) in a source checkout, else :func:`user_cache_dir`."""
    if environ.get("NUMBA_CACHE_DIR"):
        return Path(environ["NUMBA_CACHE_DIR"])
    if in_source_checkout(package_dir):
        return None
    return user_cache_dir(environ)


def configure(environ=os.environ, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """Set ``NUMBA_CACHE_DIR`` as :func:`cache_dir` says (only when unset and not in a checkout); returns the
    directory numba caches netlab's kernels in (None: beside the sources)."""
    where = cache_dir(environ, package_dir)
    if where is None or environ.get("NUMBA_CACHE_DIR"):
        return where
    environ["NUMBA_CACHE_DIR"] = str(where)
    config = sys.modules.get("numba.core.config")
    if config is not None and environ is os.environ:  # numba came first: its config read the environment already
        config.CACHE_DIR = str(where)
    return where


def kernel_sources(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The package's modules that declare compiled kernels (their text names ``njit``), in path order."""
    return sorted(p for p in package_dir.rglob("*.py") if b"njit" in p.read_bytes())


@functools.lru_cache(maxsize=None)
def kernels_stamp(package_dir: Path = PACKAGE_DIR) -> str:
    """One hash of every kernel module's path and text: what each netlab cache entry is stamped with, beside
    numba's stamp of its own file."""
    digest = hashlib.sha256()
    for path in kernel_sources(package_dir):
        digest.update(str(path.relative_to(package_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def install_locator(caching, package_dir: Path = PACKAGE_DIR) -> type:
    """Put a cache locator for ``package_dir``'s kernels first in numba's list (``caching``: the module
    ``numba.core.caching``); returns its class. Idempotent. It wraps the locator numba would have chosen
    (same folder, same disambiguator) and adds :func:`kernels_stamp` to its source stamp."""
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.61
    for cls in impl._locator_classes:
        if getattr(cls, "package_dir", None) == package_dir:
            return cls
    numba_own = list(impl._locator_classes)

    class PackageLocator(caching._CacheLocator):
        """numba's own locator for a file of ``package_dir``, stamped with every kernel module's hash too."""

        def __init__(self, inner):
            self._inner = inner

        def ensure_cache_path(self):
            self._inner.ensure_cache_path()

        def get_cache_path(self):
            return self._inner.get_cache_path()

        def get_source_stamp(self):
            return self._inner.get_source_stamp(), kernels_stamp(package_dir)

        def get_disambiguator(self):
            return self._inner.get_disambiguator()

        @classmethod
        def from_function(cls, py_func, py_file):
            if not Path(py_file).resolve().is_relative_to(package_dir):
                return None
            for other in numba_own:
                inner = other.from_function(py_func, py_file)
                if inner is not None:
                    return cls(inner)
            return None

    PackageLocator.package_dir = package_dir
    impl._locator_classes.insert(0, PackageLocator)
    return PackageLocator
