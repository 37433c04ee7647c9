"""Predicting a job's slowdown in a candidate placement from what already runs there.

* :mod:`.features`: the feature schema, per-placement raw features, the
  scikit-learn featuriser;
* :mod:`.dataset`: simulator datasets (and the schema testbed rows share),
  parquet persistence;
* :mod:`.fluid`: a TCP-like fluid simulation of a candidate with the running
  jobs on its links (the ``fluid_tcp_slowdown`` feature), compiled with numba;
* :mod:`.models`: the analytic max-min baseline, gradient boosting, random
  forest and fluid-residual pipelines, grouped cross-validation, versioned
  persistence.

The placement policies that use them (``predictive``, ``oracle``) live in
:mod:`netlab.policies.placement.predictive`.
"""

from .dataset import COLUMNS, META, TARGETS, load_dataset, save_dataset, simulator_dataset
from .features import (FEATURES, TARGET, Background, FeatureSchema, PlacementFeaturizer, feature_rows,
                       placement_features, placement_frame, water_fill)
from .models import (MODELS, MaxMinShareRegressor, ModelSchemaError, PhysicsResidualRegressor, grouped_cv,
                     load_model, make_model, median_ape, save_model)

__all__ = ["COLUMNS", "META", "TARGETS", "load_dataset", "save_dataset", "simulator_dataset", "FEATURES", "TARGET",
           "Background", "FeatureSchema", "PlacementFeaturizer", "feature_rows", "placement_features",
           "placement_frame", "water_fill", "MODELS", "MaxMinShareRegressor", "ModelSchemaError",
           "PhysicsResidualRegressor", "grouped_cv",
           "load_model", "make_model", "median_ape", "save_model"]
