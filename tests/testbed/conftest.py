"""Capability gates for the testbed tests.

CI runs as root on machines with network namespaces, so these tests run
there; elsewhere they skip with the reason that was measured, never silently.
"""

from __future__ import annotations

import importlib.util

import pytest

from netlab.testbed.probe import netadmin_missing, sshd_path

NETADMIN_REASON = netadmin_missing()
SSHD = sshd_path()
HAS_TORCH = importlib.util.find_spec("torch") is not None

needs_netadmin = pytest.mark.skipif(NETADMIN_REASON is not None, reason=NETADMIN_REASON or "")
needs_sshd = pytest.mark.skipif(SSHD is None, reason="needs OpenSSH's sshd (Debian: apt-get install openssh-server)")
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs torch==2.13.0 (pip install torch==2.13.0)")
