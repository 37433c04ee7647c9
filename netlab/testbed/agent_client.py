"""The controller's side of one agent: JSON lines over an SSH channel's stdio.

Why stdio and not a socket: the agent opens no network port, so nothing on
the hosts listens for control traffic; the SSH session authenticates the
controller and carries requests and replies. When the session drops, the
agent sees EOF on stdin and cleans up (see ``agent/README.md``).

Liveness: a host that hangs, or an agent stopped with SIGSTOP, keeps its SSH
channel open, so end of file never comes. The agent writes a ``heartbeat``
event every second; when nothing at all has come from it for
``dead_after_s`` (10 s by default) the client declares it dead exactly as if
the channel had closed: pending requests fail, ``on_close`` runs with the
reason (so the controller fails its jobs at once), and the channel is closed
(an agent that wakes up then sees end of file and undoes what it did). The
client sends the agent a ``heartbeat`` notification every ``heartbeat_s`` in
turn, so an agent started with ``--controller-timeout-s`` stops when the
controller is gone without the channel closing.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import threading
import time
from concurrent.futures import Future

log = logging.getLogger(__name__)


class AgentError(RuntimeError):
    """An agent refused or failed a command; ``type`` and ``field`` come from its reply."""

    def __init__(self, host: str, message: str, type: str = "AgentError", field: str | None = None):
        where = f" (field {field!r})" if field else ""
        super().__init__(f"agent on {host}: {type}: {message}{where}")
        self.host, self.type, self.field, self.message = host, type, field, message


class AgentClient:
    """Requests, replies and events of one agent.

    A reader thread owns the channel's stdout: replies resolve the matching
    :class:`Future`; events (``telemetry``, ``job_exit``, ...) are appended to
    :attr:`events` and passed to ``on_event`` (called from the reader thread).
    When the channel closes (the agent exited, or its SSH session or
    connection died), pending requests fail and ``on_close`` is called once
    with the reason, from the reader thread, after every event read before.
    """

    def __init__(self, host: str, channel, ssh=None, on_event=None, stderr_lines: int = 200, on_close=None,
                 heartbeat_s: float = 1.0, dead_after_s: float = 10.0):
        self.host, self.channel, self.ssh = host, channel, ssh
        self.on_event, self.on_close = on_event, on_close
        self.heartbeat_s, self.dead_after_s = heartbeat_s, dead_after_s
        self.close_reason: str | None = None
        self.hello: dict | None = None
        self.events: list[dict] = []
        self.stderr = collections.deque(maxlen=stderr_lines)
        self.last_heard = time.monotonic()  # when the agent last wrote anything (a reply, an event, a heartbeat)
        self._ids = itertools.count(1)
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._hello = threading.Event()
        self._closed = threading.Event()
        self._send_lock = threading.Lock()  # one writer at a time on the channel (requests, heartbeats)
        self._closing = threading.Lock()  # the close sequence runs once, whoever notices first
        self._close_started = False
        self._out = channel.makefile("r")
        self._err = channel.makefile_stderr("r")
        self._threads = [threading.Thread(target=self._read, name=f"agent-{host}", daemon=True),
                         threading.Thread(target=self._read_stderr, name=f"agent-{host}-err", daemon=True),
                         threading.Thread(target=self._watch, name=f"agent-{host}-live", daemon=True),
                         threading.Thread(target=self._beat, name=f"agent-{host}-beat", daemon=True)]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------ reading
    def _read(self) -> None:
        why = "reader stopped"
        try:
            for line in self._out:
                self.last_heard = time.monotonic()
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = json.loads(line)
                except ValueError:
                    log.warning("agent on %s wrote a non-JSON line: %.200s", self.host, line)
                    continue
                self._dispatch(msg)
        except (OSError, EOFError) as exc:  # the channel dropped
            log.debug("agent on %s: channel closed: %r", self.host, exc)
            why = f"{type(exc).__name__}: {exc}"
        else:
            why = "end of stream"
        finally:
            # The agent's stderr reader may still be draining; give it a moment so the reason has the tail.
            self._threads[1].join(timeout=0.5)
            bye = any(e.get("event") == "bye" for e in self.events[-3:])
            status = self.channel.exit_status if self.channel.exit_status_ready() else None
            self._shut(f"agent on {self.host}: channel closed ({why}"
                       f"{', after the agent said bye' if bye else ', without a bye from the agent'}"
                       f"{f', exit status {status}' if status not in (None, -1) else ''})" + self._stderr_tail(),
                       AgentError(self.host, "channel closed before a reply" + self._stderr_tail(), "ChannelClosed"))

    def _shut(self, reason: str, err: "AgentError") -> bool:
        """Mark the agent gone (once, whichever of the reader and the watchdog notices first): fail pending
        requests with ``err`` and call ``on_close`` with ``reason``. False if it was already gone."""
        with self._closing:
            if self._close_started:
                return False
            self._close_started = True
        self.close_reason = reason
        self._closed.set()
        self._hello.set()
        with self._lock:
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
        if self.on_close is not None:
            try:
                self.on_close(self.host, self.close_reason)
            except Exception:  # noqa: BLE001 - a callback bug must not hide the closure
                log.exception("close callback failed for %s", self.host)
        return True

    def _watch(self) -> None:
        """Declare the agent dead after ``dead_after_s`` without a line from it (counted from its hello:
        starting and probing may take longer). Only watches: a send that blocks cannot delay it."""
        if self.dead_after_s <= 0:
            return
        while not self._closed.wait(min(0.5, self.dead_after_s / 4)):
            if self.hello is None:
                continue
            silent = time.monotonic() - self.last_heard
            ready = getattr(self.channel, "recv_ready", None)
            if silent > self.dead_after_s and not (ready is not None and ready()):  # unread lines: it spoke
                reason = (f"agent on {self.host}: silent for {silent:.1f} s (no heartbeat; the limit is "
                          f"{self.dead_after_s:g} s): the agent is stopped or its host hangs")
                if self._shut(reason, AgentError(self.host, reason, "AgentDead")):
                    log.error("%s", reason)
                    try:  # a stopped agent that wakes up then finds end of file and undoes what it did
                        self.channel.close()
                    except Exception:  # noqa: BLE001 - the transport may be gone too
                        pass
                return

    def _beat(self) -> None:
        """Our heartbeat to the agent every ``heartbeat_s`` (a notification: it sends no reply)."""
        if self.heartbeat_s <= 0:
            return
        beat = (json.dumps({"cmd": "heartbeat"}) + "\n").encode()
        while not self._closed.wait(self.heartbeat_s):
            try:
                with self._send_lock:
                    self.channel.sendall(beat)
            except OSError:
                return  # the reader sees the channel close

    def _dispatch(self, msg: dict) -> None:
        if "id" in msg:
            with self._lock:
                fut = self._pending.pop(msg["id"], None)
            if fut is None:
                log.warning("agent on %s: reply to unknown request %r", self.host, msg.get("id"))
            elif msg.get("ok"):
                fut.set_result(msg.get("result"))
            else:
                e = msg.get("error") or {}
                fut.set_exception(AgentError(self.host, e.get("message", "unknown error"), e.get("type", "AgentError"),
                                             e.get("field")))
            return
        if msg.get("event") == "heartbeat":  # counted as heard (above); not kept: one a second adds up
            return
        msg.setdefault("host", self.host)
        if msg.get("event") == "hello":
            self.hello = msg
            self._hello.set()
        self.events.append(msg)
        if self.on_event is not None:
            try:
                self.on_event(msg)
            except Exception:  # noqa: BLE001 - a callback bug must not kill the reader
                log.exception("event callback failed for %s", self.host)

    def _read_stderr(self) -> None:
        try:
            for line in self._err:
                self.stderr.append(line.rstrip())
        except (OSError, EOFError):
            pass

    def _stderr_tail(self, n: int = 5) -> str:
        tail = list(self.stderr)[-n:]
        return ("; agent stderr: " + " | ".join(tail)) if tail else ""

    # ------------------------------------------------------------ requests
    def wait_hello(self, timeout_s: float = 30.0) -> dict:
        if not self._hello.wait(timeout_s):
            raise AgentError(self.host, f"no hello within {timeout_s:.0f} s" + self._stderr_tail(), "Timeout")
        if self.hello is None:
            raise AgentError(self.host, "agent exited before its hello" + self._stderr_tail(), "ChannelClosed")
        return self.hello

    def submit(self, cmd: str, **args) -> Future:
        fut: Future = Future()
        if self._closed.is_set():
            fut.set_exception(AgentError(self.host, "channel is closed" + self._stderr_tail(), "ChannelClosed"))
            return fut
        rid = next(self._ids)
        with self._lock:
            self._pending[rid] = fut
        try:
            data = (json.dumps({"id": rid, "cmd": cmd, "args": args}) + "\n").encode()
            with self._send_lock:  # the heartbeat thread writes too
                self.channel.sendall(data)
        except OSError as exc:
            with self._lock:
                self._pending.pop(rid, None)
            fut.set_exception(AgentError(self.host, f"cannot send {cmd}: {exc}", "ChannelClosed"))
        return fut

    def call(self, cmd: str, timeout_s: float = 60.0, **args):
        """Send ``cmd`` and wait for its result; raise :class:`AgentError` on refusal."""
        fut = self.submit(cmd, **args)
        try:
            return fut.result(timeout=timeout_s)
        except TimeoutError:
            raise AgentError(self.host, f"{cmd}: no reply within {timeout_s:.0f} s", "Timeout") from None

    def events_of(self, kind: str) -> list[dict]:
        return [e for e in list(self.events) if e.get("event") == kind]

    @property
    def alive(self) -> bool:
        return not self._closed.is_set()

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask the agent to clean up and exit, then close the SSH session (bounded: a dead agent is not asked)."""
        if self.alive:
            try:
                self.call("shutdown", timeout_s=timeout_s)
            except AgentError as exc:
                log.debug("shutdown of %s: %s", self.host, exc)
            self._closed.wait(timeout_s)
        try:
            self.channel.close()
        finally:
            if self.ssh is not None:
                self.ssh.close()
