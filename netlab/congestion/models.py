"""Alias of :mod:`netlab.slowdown.models` (moved there, below the policy layer); kept so existing imports work.

The module object is the same (``sys.modules`` points this name at it), so
private names, monkeypatching and pickles naming this path all still resolve.
"""

import sys

from ..slowdown import models as _module

sys.modules[__name__] = _module
