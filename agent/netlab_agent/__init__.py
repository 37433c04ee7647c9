"""netlab testbed agent.

One agent runs per testbed host. The controller starts it over SSH and talks
JSON lines on its stdin/stdout; the agent opens no port of its own, so the
management channel is the only way in and losing it stops everything the agent
started (see ``server.py``). This package must not import torch at import
time: hosts that only shape links need nothing but pyroute2.
"""

__version__ = "0.1.0"
