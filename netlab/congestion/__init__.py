"""Predicting a job's slowdown in a candidate placement from what already runs there: datasets and experiments.

The model itself (features, fluid simulation, models, training rows) lives in
:mod:`netlab.slowdown`, below the policy layer, so the ``predictive``
placement uses it without reaching the simulator; import its names from
there (:mod:`netlab.slowdown.features`, :mod:`netlab.slowdown.models`,
:mod:`netlab.slowdown.fluid`, :mod:`netlab.slowdown.samples`). On top of it, here:

* :mod:`.dataset`: simulator datasets with the registered placement styles,
  parquet persistence (:func:`simulator_dataset`, :func:`save_dataset`,
  :func:`load_dataset`);
* :mod:`.testbed_data`: the same rows measured on the testbed;
* :mod:`.fidelity`, :mod:`.interleave`: simulator-vs-testbed experiments.

The placement policies that use the model (``predictive``, ``oracle``) live in
:mod:`netlab.policies.placement.predictive`.
"""

from .dataset import load_dataset, save_dataset, simulator_dataset

__all__ = ["load_dataset", "save_dataset", "simulator_dataset"]
