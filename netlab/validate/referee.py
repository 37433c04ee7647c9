"""Build and run the packet-level referee (``ns3/referee.cc``, ns-3 3.37 from Debian's ``libns3-dev``).

The C++ source ships in the package; :func:`build_referee` compiles it on
demand with ``pkg-config``'s flags into a cache directory outside the package
(``$NETLAB_CACHE_DIR`` or ``~/.cache/netlab``, ``referee/<hash>/referee``), keyed
by a hash of the source, the compiler command and the ns-3 version, so a
changed source is rebuilt and an unchanged one never. Concurrent builders
take a file lock; the binary appears by an atomic rename.

:func:`run_referee` writes the scenario's JSON into a temporary folder,
runs the binary as an argv list with a timeout and reads its output; the
folder is removed afterwards, whatever happens; one left by a process killed
before its cleanup ran (SIGKILL) is removed by the next run, which finds that
process gone (:func:`sweep_stale_folders`). The referee itself dies with its
parent, by ``PR_SET_PDEATHSIG``.
:func:`referee_unavailable` says why the referee cannot run here (no
compiler, no ns-3, no JSON header), or None.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .scenario import RefereeScenario, referee_input

SOURCE = Path(__file__).with_name("ns3") / "referee.cc"
NS3_MODULES = ("ns3-core", "ns3-network", "ns3-internet", "ns3-point-to-point", "ns3-applications",
               "ns3-traffic-control")
JSON_HEADER = "nlohmann/json.hpp"
#: what the Debian packages are called, for the messages
PACKAGES = "libns3-dev pkg-config g++ nlohmann-json3-dev"
#: a sequential (alone) run: iterations per job, of which the first are left out (alone, a job's period
#: settles after its first iteration: no other traffic, no jitter)
ALONE_ITERATIONS, ALONE_WARMUP = 6, 2
#: a run's temporary folder: this prefix, the Python process's id, a random tail
TMP_PREFIX = "netlab-referee-"


class RefereeError(RuntimeError):
    """The referee could not be built or did not finish a scenario."""


@dataclass
class RefereeResult:
    """One referee run: every job's iteration start times (s), the run's counters and each job's loss counters
    (``job_loss``: job id -> drops, ECN marks, retransmits, RTOs, ...; empty from a referee without them)."""

    starts: dict[int, np.ndarray]
    stats: dict
    sim_s: float
    completed: bool
    drops_marks_by_link: list = field(default_factory=list)
    job_loss: dict[int, dict] = field(default_factory=dict)
    trace: dict | None = None

    @property
    def wall_s(self) -> float:
        return float(self.stats.get("wall_s", float("nan")))


def cache_dir() -> Path:
    return Path(os.environ.get("NETLAB_CACHE_DIR") or Path.home() / ".cache" / "netlab")


def _pkg_config(*args: str) -> list[str]:
    out = subprocess.run(["pkg-config", *args, *NS3_MODULES], check=True, capture_output=True, text=True).stdout
    return out.split()


def referee_unavailable() -> str | None:
    """Why the referee cannot be built here, or None when it can."""
    missing = [tool for tool in ("g++", "pkg-config") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found (apt-get install {PACKAGES})"
    try:
        _pkg_config("--exists")
    except subprocess.CalledProcessError:
        return f"pkg-config finds no ns-3 ({', '.join(NS3_MODULES)}; apt-get install {PACKAGES})"
    if not _compiler_finds(JSON_HEADER):
        return f"{JSON_HEADER} not found (apt-get install nlohmann-json3-dev)"
    return None


def _compiler_finds(header: str) -> bool:
    """True if g++ finds ``header`` on its own include path (asked, not guessed from folder names)."""
    try:
        done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", "-"], input=f"#include <{header}>\n",
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _compile_command(output: Path) -> list[str]:
    # Debian's ns-3 .pc files name an include directory "/usr\;" and link GSL's two .so files, which exist only
    # with libgsl-dev; libns3-core already links them, so both are left out (shared/reference/ns3-facts.md).
    cflags = [f for f in _pkg_config("--cflags") if f.startswith("-I") and "\\" not in f and ";" not in f]
    libs = [f for f in _pkg_config("--libs") if "libgsl" not in f]
    libs = list(dict.fromkeys(libs))  # the .pc files repeat -lns3-core many times
    return ["g++", "-std=c++17", "-O2", "-o", str(output), str(SOURCE), *cflags, *libs]


def build_referee(build_dir=None, force: bool = False) -> Path:
    """The referee binary, compiled first if the source, compiler flags or ns-3 changed."""
    why = referee_unavailable()
    if why:
        raise RefereeError(f"cannot build the ns-3 referee: {why}")
    from filelock import FileLock

    base = Path(build_dir) if build_dir else cache_dir() / "referee"
    version = subprocess.run(["pkg-config", "--modversion", "ns3-core"], capture_output=True, text=True).stdout
    probe = _compile_command(Path("OUT"))
    digest = hashlib.sha256(SOURCE.read_bytes() + json.dumps([probe, version]).encode()).hexdigest()[:16]
    target = base / digest / "referee"
    if target.exists() and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / ".build.lock")):
        if target.exists() and not force:
            return target
        tmp = target.with_name(f".referee.{os.getpid()}.tmp")
        try:
            proc = subprocess.run(_compile_command(tmp), capture_output=True, text=True)
            if proc.returncode != 0:
                raise RefereeError(f"compiling {SOURCE} failed:\n{proc.stderr[-4000:]}")
            os.replace(tmp, target)
        finally:
            if tmp.exists():
                tmp.unlink()
    return target


def read_output(path) -> RefereeResult:
    """The referee's output file (see ``referee.cc``)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
        starts = {int(j["id"]): np.asarray(j["starts"], dtype=float) for j in doc["jobs"]}
        job_loss = {int(j["id"]): {k: int(v) for k, v in j["loss"].items()} for j in doc["jobs"] if "loss" in j}
        return RefereeResult(starts, dict(doc["stats"]), float(doc["sim_s"]), bool(doc["completed"]),
                             list(doc.get("drops_marks_by_link", [])), job_loss, doc.get("trace"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RefereeError(f"{path}: not a referee output: {type(exc).__name__}: {exc}") from None


def sweep_stale_folders() -> list[Path]:
    """Remove the temporary folders of referee runs whose Python process is gone (killed before its cleanup
    ran: SIGKILL); the folder's name carries that process's id. Returns what was removed."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*-*"):
        pid = folder.name[len(TMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or another user's process): not ours to remove
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def alone_scenario(sc: RefereeScenario) -> RefereeScenario:
    """``sc`` for a sequential run: every job alone, :data:`ALONE_ITERATIONS` iterations, no jitter."""
    return replace(sc, jobs=tuple(replace(j, iterations=ALONE_ITERATIONS) for j in sc.jobs), jitter=0.0,
                   warmup=ALONE_WARMUP)


def alone_periods(result: RefereeResult) -> dict[int, float]:
    """Every job's mean period after :data:`ALONE_WARMUP` iterations of a sequential run."""
    return {jid: float((s[-1] - s[ALONE_WARMUP]) / (len(s) - 1 - ALONE_WARMUP)) for jid, s in result.starts.items()}


def run_referee(sc: RefereeScenario, timeout_s: float = 3600.0, binary=None, max_sim_s: float = 600.0,
                build_dir=None, alone: bool = False, trace_bin_s: float = 0.0) -> RefereeResult:
    """Run ``sc`` packet by packet; every job's iteration starts and the drop / mark / RTO counts.

    ``alone``: every job on its own instead, one after the other in one run (:func:`alone_scenario`;
    :func:`alone_periods` reads the result): what each job's iteration is with the fabric to itself.
    ``trace_bin_s`` > 0: the result's ``trace`` holds, per ring flow (job, sending rank), when each ring step was
    sent and arrived whole and its bytes per bin of that many seconds, and per switch egress queue its bytes sent,
    arrivals, queue lengths they found (sum, max) and ECN marks per bin (:mod:`netlab.validate.trace` reads it).
    Tracing moves no packet: the times are the untraced run's to the bit (a test checks).
    """
    binary = Path(binary) if binary else build_referee(build_dir)
    doc = referee_input(alone_scenario(sc), max_sim_s, sequential=True) if alone else referee_input(sc, max_sim_s)
    if trace_bin_s > 0:
        doc["trace"] = dict(bin_s=float(trace_bin_s))
    sweep_stale_folders()
    with tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{os.getpid()}-") as tmp:
        inp, out = Path(tmp) / "scenario.json", Path(tmp) / "result.json"
        inp.write_text(json.dumps(doc))
        env = dict(os.environ, NETLAB_REFEREE_PARENT=str(os.getpid()))
        try:
            proc = subprocess.run([str(binary), str(inp), str(out)], capture_output=True, text=True,
                                  timeout=timeout_s, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise RefereeError(f"scenario {sc.name}: the referee did not finish within {timeout_s:.0f} s") from None
        if proc.returncode != 0:
            raise RefereeError(f"scenario {sc.name}: the referee exited with {proc.returncode}: "
                               f"{proc.stderr.strip()[-2000:]}")
        result = read_output(out)
    if not result.completed:
        raise RefereeError(f"scenario {sc.name}: not every job finished its iterations within {max_sim_s} simulated "
                           f"seconds (reached {result.sim_s:.3f} s; {result.stats})")
    return result
