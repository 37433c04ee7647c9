"""Where numba caches netlab's kernels: never inside an installed copy, so switching an environment from
``pip install .`` to ``pip install -e .`` (the README's main job, then its notebook command) keeps it working.

The end-to-end test builds a real environment: a fresh venv whose dependencies come from this one (a ``.pth``
line, so nothing is downloaded), netlab installed from a copy of the sources, first as a regular install, then
editable. ``benchmarks/bench_fresh_clone.py`` runs the README's own commands on a fresh clone.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from netlab.numba_cache import cache_dir, configure, in_source_checkout, user_cache_dir

ROOT = Path(__file__).resolve().parents[1]


def test_the_cache_rules(tmp_path):
    checkout = tmp_path / "checkout" / "netlab"
    checkout.mkdir(parents=True)
    (checkout.parent / "pyproject.toml").write_text("")
    installed = tmp_path / "site-packages" / "netlab"
    installed.mkdir(parents=True)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert in_source_checkout(checkout) and not in_source_checkout(installed)
    assert cache_dir(env, checkout) is None  # a checkout keeps numba's own place, beside the sources
    assert cache_dir(env, installed) == tmp_path / "cache" / "netlab" / "numba"
    assert user_cache_dir({}) == Path.home() / ".cache" / "netlab" / "numba"
    mine = {**env, "NUMBA_CACHE_DIR": "/somewhere/else"}
    assert cache_dir(mine, installed) == Path("/somewhere/else")  # the user's own choice wins
    configure(env, installed)
    assert env["NUMBA_CACHE_DIR"] == str(tmp_path / "cache" / "netlab" / "numba")
    configure(mine, installed)
    assert mine["NUMBA_CACHE_DIR"] == "/somewhere/else"
    untouched = dict(env, NUMBA_CACHE_DIR="")
    del untouched["NUMBA_CACHE_DIR"]
    configure(untouched, checkout)
    assert "NUMBA_CACHE_DIR" not in untouched


def _sources(dest: Path) -> Path:
    """What `pip install` and notebook 01 need of this checkout, copied (pip builds inside a source tree)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", ".ipynb_checkpoints", "results")
    for name in ("netlab", "agent", "notebooks"):
        shutil.copytree(ROOT / name, dest / name, ignore=skip)
    return dest


def _run(argv, env, cwd):
    """Run from ``cwd`` (not this checkout: a netlab/ folder in the working directory would be imported first)."""
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, cwd=cwd)
    assert out.returncode == 0, f"{argv}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.mark.slow
def test_an_installed_copy_caches_outside_site_packages_and_the_editable_install_then_works(tmp_path):
    src = _sources(tmp_path / "src")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # this environment's dependencies
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), MPLBACKEND="Agg", PATH=f"{env_dir / 'bin'}:{env['PATH']}")
    pip = [python, "-m", "pip", "install", "-q", "--no-deps"]
    _run(pip + [str(src)], env, tmp_path)
    assert (site / "netlab" / "__init__.py").is_file()
    _run([env_dir / "bin" / "netlab", "simulate", "--max-jobs", "20", "--network", "fair", "--quiet", "--out",
          str(tmp_path / "sim")], env, tmp_path)
    installed = site / "netlab"
    assert not [p for p in installed.rglob("*") if p.suffix in (".nbi", ".nbc")]  # nothing pip does not know
    cached = list((tmp_path / "cache" / "netlab" / "numba").rglob("*.nbi"))
    assert cached, "numba cached nothing in the user cache directory"
    # the README's notebook command: the same environment, now editable
    _run(pip + ["-e", str(src)], env, tmp_path)
    assert not installed.exists()  # the regular install is gone whole: no namespace folder shadows the editable one
    policies = _run([env_dir / "bin" / "netlab", "policies"], env, tmp_path)
    assert "tiresias" in policies.stdout and "tcp" in policies.stdout
    where = _run([python, "-c", "import netlab, netlab.network; print(netlab.__file__)"], env, tmp_path)
    assert where.stdout.strip() == str(src / "netlab" / "__init__.py")


CALLER = "from numba import njit\nfrom callee import g\n\n\n@njit(cache=True)\ndef f():\n    return g() + 10\n"
CALLEE = "from numba import njit\n\n\n@njit(cache=True)\ndef g():\n    return {value}\n"
RUN = ("import sys\nfrom pathlib import Path\nfrom numba.core import caching\n"
       "from netlab.numba_cache import install_locator\n"
       "install_locator(caching, Path(sys.argv[1]).resolve())\n"
       "sys.path.insert(0, sys.argv[1])\nfrom caller import f\nprint(f())\n")


def test_an_edited_callee_recompiles_its_cached_caller(tmp_path):
    """numba stamps a cache entry with its own file only: the caller's entry, compiled with the callee inside,
    would survive the callee's edit. The package locator stamps it with every kernel module's text too."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "caller.py").write_text(CALLER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def run() -> str:
        return subprocess.run([sys.executable, "-c", RUN, str(package)], env=env, capture_output=True, text=True,
                              check=True).stdout.strip()

    (package / "callee.py").write_text(CALLEE.format(value=1))
    assert run() == "11"
    assert list((tmp_path / "cache").rglob("caller.f-*.nbi"))  # the caller's entry is on disk
    (package / "callee.py").write_text(CALLEE.format(value=2))
    assert run() == "12"


def test_the_kernels_stamp_follows_kernel_modules_only(tmp_path):
    from netlab.numba_cache import kernel_sources, kernels_stamp

    (tmp_path / "a.py").write_text("from numba import njit\n")
    (tmp_path / "plain.py").write_text("X = 1\n")
    assert kernel_sources(tmp_path) == [tmp_path / "a.py"]
    before = kernels_stamp(tmp_path)
    kernels_stamp.cache_clear()
    (tmp_path / "plain.py").write_text("X = 2\n")
    assert kernels_stamp(tmp_path) == before
    kernels_stamp.cache_clear()
    (tmp_path / "a.py").write_text("from numba import njit  # edited\n")
    assert kernels_stamp(tmp_path) != before
    kernels_stamp.cache_clear()
