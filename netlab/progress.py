"""One place that makes progress bars: widgets in Jupyter when ipywidgets is there, text bars otherwise.

``tqdm.auto`` picks the widget bar in any Jupyter kernel and, without ipywidgets, prints a red
``TqdmWarning`` ("IProgress not found") in every notebook. :func:`tqdm` takes the widget bar only
when ipywidgets imports, else the plain text bar (which Jupyter renders in place too).
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def tqdm_class():
    """``tqdm.auto.tqdm`` when ipywidgets is importable, else ``tqdm.std.tqdm``."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        from tqdm.std import tqdm as bar
    else:
        from tqdm.auto import tqdm as bar
    return bar


def tqdm(*args, **kwargs):
    """A progress bar (same arguments as :class:`tqdm.tqdm`)."""
    return tqdm_class()(*args, **kwargs)
