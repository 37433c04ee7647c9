"""An installed netlab (not only a checkout) carries the testbed agent's source, so notebook 04 can deploy it."""

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_wheel_carries_the_agent_source(tmp_path):
    argv = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp_path),
            str(REPO)]
    subprocess.run(argv, check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = tmp_path.glob("netlab_sched-*.whl")
    prefix = "share/netlab-agent/"
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.split("/data/", 1)[1][len(prefix):] for n in names if ".data/data/" + prefix in n}
    source = {str(p.relative_to(REPO / "agent")) for p in (REPO / "agent").glob("netlab_agent/*.py")}
    assert {"pyproject.toml", "README.md"} | source <= shipped
    assert "netlab/validate/ns3/referee.cc" in names  # the packet-level referee compiles from the package
    # netlab.testbed.deploy looks there (after a checkout's agent/)
    from netlab.testbed import deploy

    assert any(str(p).endswith(str(Path("share") / "netlab-agent")) for p in deploy.AGENT_SOURCES)


#: what moved out of the core install into the extras (testbed, notebooks); the main job needs none of it
EXTRAS_ONLY = ("jupyterlab", "ipykernel", "IPython", "pyroute2", "paramiko", "psutil", "torch", "ipywidgets", "dask",
               "distributed")


def test_the_main_job_needs_no_extra(tmp_path):
    """``pip install .`` then ``netlab demo``: the demo (sweep, verdicts, report) runs with every extra blocked."""
    code = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {EXTRAS_ONLY!r}:
            raise ImportError(f"{{name}} is an extra")
sys.meta_path.insert(0, Block())
from netlab.cli import app
app(["demo", "--out", {str(tmp_path / "demo")!r}, "--max-jobs", "12", "--seeds", "1", "--oversub", "8",
     "--no-ideal", "--backend", "serial"], standalone_mode=False)
print(sorted(m for m in {EXTRAS_ONLY!r} if m in sys.modules))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "demo" / "report" / "report.html").is_file()  # the demo writes its report folder there
