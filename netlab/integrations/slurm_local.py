"""A real Slurm on this one machine: munge, MariaDB, slurmdbd, slurmctld and one slurmd per node name.

Why real: netlab's Slurm files (``topology.conf``, ``sacct`` dumps, ``sbatch``
lines) are only right if the Slurm that operators run reads them the same
way; tests and the bundled sacct sample come from this cluster.

What Debian's ``slurm-wlm`` 22.05 allows, found by running it (root):

* **several slurmd on one machine** work: every ``NodeName`` line has the same
  ``NodeHostname=localhost``/``NodeAddr=127.0.0.1`` and its own ``Port=``, and
  each slurmd is started as ``slurmd -D -N <name>`` (Debian's build takes
  ``-N``; slurmctld accepts the shared host name). No front-end mode needed.
* **GPUs** are ``Gres=gpu:N`` with ``AutoDetect=off`` in ``gres.conf``. A GPU
  without ``File=`` is dropped by slurmd ("Removing file-less GPU"), and a
  regular file is refused ("not a valid character or block device"), so each
  GPU's ``File`` is a character device made here with ``mknod`` as a copy of
  ``/dev/null`` (1:3): no device is touched (``task/none``, no cgroups).
  ``SlurmdParameters=config_overrides`` lets a node declare more CPUs than
  the machine has (one per GPU, so every GPU can run its own job).
* **sacct needs slurmdbd**: with ``AccountingStorageType=accounting_storage/none``
  sacct answers "Slurm accounting storage is disabled"; ``accounting_storage/filetxt``
  is gone from 22.05 (no plugin in the package). ``sacct -c`` still reads a
  ``jobcomp/filetxt`` file, but prints ``Submit`` as the start time (the
  real submit time shows under ``Eligible``) and leaves ``AllocTRES`` empty,
  so it cannot give GPUs or waits. So this cluster runs ``slurmdbd`` on a
  private MariaDB (``mariadb-install-db`` into the temp directory, TCP on
  127.0.0.1 only, a random password in a 0600 file) and
  ``AccountingStorageTRES=gres/gpu``, and sacct prints ``gres/gpu=N``.
* **munge** runs with its own key (``munged -F --key-file ... --socket ...``);
  the socket's directory must be searchable by all (munged refuses 0700).
  slurmctld/slurmd/clients find it through ``AuthInfo=socket=...``; the
  slurmdbd connection does not read AuthInfo but ``AccountingStoragePass``,
  which Slurm documents as the munge socket for slurmdbd.

Every process is started by :class:`LocalSlurm` as a child in the foreground
(``-D``/``-F``), recorded, and stopped by that record only (SIGTERM, then
SIGKILL after a bounded wait): nothing is found or killed by name.
Readiness is polled with bounded timeouts (``scontrol ping``, ``sinfo`` node
states). Ports are free ports on 127.0.0.1 picked at start.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..topology import check_name
from ..hostlist import compress

#: programs the cluster needs (Debian: slurm-wlm, slurmdbd, munge, mariadb-server)
PROGRAMS = ("munged", "slurmctld", "slurmd", "slurmdbd", "sacctmgr", "scontrol", "sbatch", "squeue", "sinfo",
            "sacct", "scancel", "mariadbd", "mariadb-install-db", "mariadb", "true")
CLUSTER = "netlab"
#: squeue job states of a job that has not finished
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


class SlurmError(RuntimeError):
    """The local Slurm could not start, or a Slurm command failed; the message has the command and its output."""


def missing() -> list[str]:
    """Why a local Slurm cannot run here (empty if it can): not root, or programs not installed."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append("needs root (slurmd runs jobs as any user; munged and MariaDB are started as root)")
    absent = [p for p in PROGRAMS if shutil.which(p) is None]
    if absent:
        reasons.append(f"programs not found: {', '.join(absent)} (Debian: apt-get install slurm-wlm slurmdbd "
                       "munge mariadb-server)")
    return reasons


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    role: str
    popen: subprocess.Popen
    log: Path


@dataclass
class LocalSlurm:
    """A Slurm cluster of ``nodes`` (name -> GPUs) under ``root``; ``topology_conf`` is the tree slurmctld reads.

    Use as a context manager, or :meth:`start` then :meth:`stop`.
    """

    root: Path
    nodes: dict[str, int]
    topology_conf: str
    procs: list[Proc] = field(default_factory=list)

    def __post_init__(self):
        self.root = Path(self.root)
        if not self.nodes:
            raise SlurmError("a Slurm cluster needs at least one node")
        for n, g in self.nodes.items():
            check_name(n, "slurm node")
            if not isinstance(g, int) or g < 0:
                raise SlurmError(f"node {n}: GPUs must be an integer >= 0, got {g!r}")
        self.conf = self.root / "etc" / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.env.pop("SLURM_JOB_ID", None)

    # ---------------------------------------------------------------- files
    def _dirs(self) -> None:
        for d in ("etc", "state", "log", "out", "dev", "db", "munge"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        for n in self.nodes:
            (self.root / "spool" / n).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        # munged wants every directory on its socket's path searchable by all, and a socket path is at most
        # 107 bytes: the sockets live in a short directory of their own under the system temp dir, not in root
        # (pytest's tmp_path is 0700); it is removed by stop().
        if getattr(self, "sock_dir", None) is None:
            self.sock_dir = Path(tempfile.mkdtemp(prefix="netlab-slurm-"))
            os.chmod(self.sock_dir, 0o755)

    def _fake_gpus(self) -> list[Path]:
        most = max(self.nodes.values())
        paths = [self.root / "dev" / f"gpu{i}" for i in range(most)]
        for p in paths:
            if not p.exists():
                os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null: Slurm only stats it
        return paths

    def write_configs(self) -> None:
        """slurm.conf, gres.conf, topology.conf, slurmdbd.conf and the munge key, ports picked now."""
        self._dirs()
        r = self.root
        key = r / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
            os.chmod(key, 0o600)
        self.ctld_port, self.dbd_port, self.db_port = free_port(), free_port(), free_port()
        self.node_ports = {n: free_port() for n in self.nodes}
        self.db_password = secrets.token_hex(16)
        self.munge_socket = self.sock_dir / "munge.sock"
        gpus = self._fake_gpus()
        node_lines = []
        for n, g in self.nodes.items():
            gres = f" Gres=gpu:{g}" if g else ""
            node_lines.append(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={self.node_ports[n]} "
                              f"CPUs={max(g, 1)}{gres} State=UNKNOWN")
        self.conf.write_text("\n".join([
            "# written by netlab.integrations.slurm_local",
            f"ClusterName={CLUSTER}",
            "SlurmctldHost=localhost",
            f"SlurmctldPort={self.ctld_port}",
            "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}/%n",
            f"SlurmctldPidFile={r / 'state' / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'spool'}/%n/slurmd.pid",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log'}/slurmd-%n.log",
            "SlurmdParameters=config_overrides",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "SwitchType=switch/none", "MpiDefault=none",
            f"MailProg={shutil.which('true')}",  # a local cluster sends no mail; found on PATH like the rest
            "TopologyPlugin=topology/tree",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "GresTypes=gpu",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=localhost",
            f"AccountingStoragePort={self.dbd_port}",
            f"AccountingStoragePass={self.munge_socket}",
            "AccountingStorageTRES=gres/gpu",
            "JobCompType=jobcomp/none",
            "ReturnToService=2", "MinJobAge=600", "KillWait=5", "InactiveLimit=0",
            *node_lines,
            "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]) + "\n")
        (r / "etc" / "gres.conf").write_text(
            "AutoDetect=off\n" + "".join(
                f"NodeName={n} Name=gpu Count={g} File={','.join(str(p) for p in gpus[:g])}\n"
                for n, g in self.nodes.items() if g))
        (r / "etc" / "topology.conf").write_text(self.topology_conf)
        dbd = r / "etc" / "slurmdbd.conf"
        dbd.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}",
            "DbdHost=localhost", f"DbdPort={self.dbd_port}", "SlurmUser=root",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1", f"StoragePort={self.db_port}",
            "StorageUser=slurm", f"StoragePass={self.db_password}", "StorageLoc=slurm_acct_db",
            f"PidFile={r / 'state' / 'slurmdbd.pid'}", f"LogFile={r / 'log' / 'slurmdbd.log'}",
        ]) + "\n")
        os.chmod(dbd, 0o600)  # slurmdbd refuses a readable one; it holds the database password

    # ---------------------------------------------------------------- processes
    def _spawn(self, role: str, argv: list[str]) -> Proc:
        log = self.root / "log" / f"{role}.out"
        with open(log, "ab") as fh:
            popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=self.root, start_new_session=True, close_fds=True)
        proc = Proc(role, popen, log)
        self.procs.append(proc)
        return proc

    def _wait(self, what: str, ready, timeout_s: float, proc: Proc | None = None) -> None:
        """Poll ``ready()`` until true (bounded); a process that exits meanwhile fails at once, with its log."""
        t0, delay = time.monotonic(), 0.05
        while time.monotonic() - t0 < timeout_s:
            if proc is not None and proc.popen.poll() is not None:
                raise SlurmError(f"{what}: {proc.role} exited with {proc.popen.returncode}; log tail:\n"
                                 f"{_tail(proc.log)}")
            if ready():
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        tail = f"; log tail:\n{_tail(proc.log)}" if proc is not None else ""
        raise SlurmError(f"{what}: not ready after {timeout_s:.0f} s{tail}")

    def run(self, argv: list[str], timeout_s: float = 60.0, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm client command (argv list) against this cluster; SlurmError with its output if it fails."""
        try:
            done = subprocess.run(argv, env=self.env, cwd=self.root, capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{' '.join(argv)}: no answer within {timeout_s:.0f} s") from None
        if check and done.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}")
        return done

    def _ok(self, argv: list[str]) -> bool:
        try:
            return self.run(argv, timeout_s=20, check=False).returncode == 0
        except SlurmError:
            return False

    def start(self, timeout_s: float = 60.0) -> "LocalSlurm":
        """Write the configs and start every daemon, each waited for; on any failure everything started is
        stopped before the error is raised."""
        try:
            self._start(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout_s: float) -> None:
        r = self.root
        self.write_configs()
        munged = self._spawn("munged", ["munged", "-F", f"--key-file={r / 'munge' / 'munge.key'}",
                                        f"--socket={self.munge_socket}", f"--pid-file={r / 'munge' / 'munged.pid'}",
                                        f"--log-file={r / 'log' / 'munged.log'}",
                                        f"--seed-file={r / 'munge' / 'munged.seed'}"])
        self._wait("munged", self.munge_socket.exists, timeout_s, munged)
        if not (r / "db" / "mysql").exists():
            self.run(["mariadb-install-db", "--no-defaults", f"--datadir={r / 'db'}", "--user=root",
                      "--skip-test-db", "--auth-root-authentication-method=socket",
                      "--innodb-log-file-size=8M"], timeout_s=timeout_s)
        db_socket = self.sock_dir / "db.sock"
        mariadb = self._spawn("mariadbd", [
            "mariadbd", "--no-defaults", f"--datadir={r / 'db'}", f"--socket={db_socket}",
            f"--port={self.db_port}", "--bind-address=127.0.0.1", "--skip-name-resolve", "--user=root",
            f"--pid-file={r / 'state' / 'mariadbd.pid'}", f"--log-error={r / 'log' / 'mariadbd.err'}",
            "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M"])
        sql = ["mariadb", f"--socket={db_socket}", "-u", "root", "-e"]
        self._wait("mariadbd", lambda: self._ok(sql + ["SELECT 1"]), timeout_s, mariadb)
        self.run(sql + [f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.db_password}'; "
                        f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.db_password}'; "
                        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"])
        dbd = self._spawn("slurmdbd", ["slurmdbd", "-D"])  # reads slurmdbd.conf beside $SLURM_CONF
        self._wait("slurmdbd", lambda: _listening(self.dbd_port), timeout_s, dbd)
        self._wait("sacctmgr add cluster", lambda: self._ok(["sacctmgr", "-i", "add", "cluster", CLUSTER]) or
                   CLUSTER in self.run(["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"],
                                       check=False).stdout.split(), timeout_s, dbd)
        ctld = self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._wait("slurmctld", lambda: "is UP" in self.run(["scontrol", "ping"], check=False).stdout, timeout_s,
                   ctld)
        daemons = [self._spawn(f"slurmd-{n}", ["slurmd", "-D", "-N", n, "-f", str(self.conf)]) for n in self.nodes]
        t0 = time.monotonic()
        self._wait(f"slurmd on {compress(self.nodes)}", self._all_idle, timeout_s, ctld)
        for d in daemons:
            if d.popen.poll() is not None:
                raise SlurmError(f"{d.role} exited with {d.popen.returncode}; log tail:\n{_tail(d.log)}")
        self.ready_s = time.monotonic() - t0

    def node_states(self) -> dict[str, str]:
        """node -> its state as sinfo reports it (lower case: idle, mixed, allocated, down, ...)."""
        out = self.run(["sinfo", "-N", "-h", "-o", "%N %T"], check=False).stdout
        return {p[0]: p[1].lower() for p in (line.split() for line in out.splitlines()) if len(p) == 2}

    def _all_idle(self) -> bool:
        states = self.node_states()
        return set(states) == set(self.nodes) and all(s == "idle" for s in states.values())

    @property
    def pids(self) -> dict[str, int]:
        return {p.role: p.popen.pid for p in self.procs}

    def alive(self) -> list[str]:
        """Roles of the recorded processes still running."""
        return [p.role for p in self.procs if p.popen.poll() is None]

    def stop(self, timeout_s: float = 30.0) -> None:
        """Cancel this cluster's jobs (their slurmstepd outlive a stopped slurmd otherwise) and wait for them to
        end (bounded); then SIGTERM every recorded process, newest first (slurmd before slurmctld before
        slurmdbd before the database and munge), wait for each (bounded), SIGKILL what is left. Only our own
        children are signalled: their pids cannot have been reused while they are unreaped."""
        if any(p.role == "slurmctld" and p.popen.poll() is None for p in self.procs):
            try:
                if self.active_jobs():
                    self.run(["scancel", "--full", "--quiet", *self.active_jobs()], check=False)
                    self._wait("cancelled jobs", lambda: not self.active_jobs(), timeout_s)
            except (SlurmError, ValueError) as exc:  # still stop the daemons; say why the jobs may linger
                import warnings

                warnings.warn(f"local Slurm: jobs not cancelled before stopping: {exc}", stacklevel=2)
        for p in reversed(self.procs):
            if p.popen.poll() is None:
                p.popen.terminate()
            try:
                p.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait(timeout=timeout_s)
        if getattr(self, "sock_dir", None) is not None and not self.alive():
            shutil.rmtree(self.sock_dir, ignore_errors=True)
            self.sock_dir = None

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- jobs
    def sbatch(self, argv_tail: list[str]) -> str:
        """Submit (``sbatch --parsable`` + ``argv_tail``), output under ``root/out``; returns the job id."""
        out = self.run(["sbatch", "--parsable", f"--output={self.root / 'out'}/%j.out", f"--chdir={self.root}",
                        *argv_tail]).stdout.strip()
        return out.split(";")[0]

    def active_jobs(self) -> list[str]:
        """Ids of jobs not yet finished (squeue --json also lists finished jobs until MinJobAge)."""
        jobs = json.loads(self.run(["squeue", "--json"]).stdout).get("jobs", [])
        return [str(j["job_id"]) for j in jobs if j.get("job_state") in ACTIVE]

    def wait_jobs_done(self, timeout_s: float = 120.0) -> None:
        """Poll squeue until no job of this cluster is pending or running."""
        self._wait("jobs", lambda: not self.active_jobs(), timeout_s)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _tail(path: Path, chars: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"
