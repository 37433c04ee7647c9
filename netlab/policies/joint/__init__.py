"""``joint``: GPUs and bandwidth allocated together (the joint-scheduling poster, arXiv 2407.04845).

One objective, GPU computation utilisation under the links' capacities (:mod:`.program`), drives both halves:
the placement (:mod:`.placement`) picks the candidate that adds the most to it once the bandwidth is
re-shared, and the network policy (:mod:`.network`) gives the running jobs the shares the program found. Use
them together (``--placement joint --netpolicy joint``); importing this package registers both.
"""

from . import network, placement  # noqa: F401
