"""Progress bars come from one helper that needs no ipywidgets."""

import builtins
import re
from pathlib import Path

import tqdm.std

from netlab import progress


def test_text_bar_without_ipywidgets(monkeypatch):
    real = builtins.__import__

    def no_widgets(name, *args, **kwargs):
        if name == "ipywidgets":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    progress.tqdm_class.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_widgets)
    try:
        assert progress.tqdm_class() is tqdm.std.tqdm
        with progress.tqdm(total=2, disable=True) as bar:
            bar.update(2)
    finally:
        progress.tqdm_class.cache_clear()


def test_no_call_site_imports_tqdm_auto():
    root = Path(progress.__file__).parent
    skip = {"progress.py"}
    hits = [str(p.relative_to(root)) for p in root.rglob("*.py")
            if p.name not in skip
            and re.search(r"from tqdm(\.auto|\.notebook|\.autonotebook)? import", p.read_text())]
    assert hits == []
