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
