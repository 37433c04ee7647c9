"""The slowdown model: predict a job's slowdown in a candidate placement from what already runs there.

The part the placement policies use, below them and below the simulator
(imports only the network model, topology, workload and scheduler state):

* :mod:`.features`: the feature schema, per-placement raw features, the
  scikit-learn featuriser;
* :mod:`.fluid`: a TCP-like fluid simulation of a candidate with the running
  jobs on its links (the ``fluid_tcp_slowdown`` feature), compiled with numba;
* :mod:`.models`: the analytic max-min baseline, gradient boosting, random
  forest and fluid-residual pipelines, grouped cross-validation, versioned
  persistence;
* :mod:`.samples`: training rows from randomised co-locations solved by the
  network model (the placement styles passed in by the caller).

Import the submodules; this package file imports nothing, so a light user
(a caller of :func:`.samples.scatter` alone) does not pay for
scikit-learn. The user-facing front, with simulator/testbed datasets,
fidelity and interleaving experiments on top, is :mod:`netlab.congestion`.
"""
