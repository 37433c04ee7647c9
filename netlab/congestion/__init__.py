"""Predicting a job's slowdown in a candidate placement from what already runs there: the user-facing front.

The model itself (features, fluid simulation, models, training rows) lives in
:mod:`netlab.slowdown`, below the policy layer, so the ``predictive``
placement uses it without reaching the simulator; its names are re-exported
here, and ``netlab.congestion.features`` / ``.fluid`` / ``.models`` remain
aliases of the modules there. On top of it, here:

* :mod:`.dataset`: simulator datasets with the registered placement styles,
  parquet persistence;
* :mod:`.testbed_data`: the same rows measured on the testbed;
* :mod:`.fidelity`, :mod:`.interleave`: simulator-vs-testbed experiments.

The placement policies that use the model (``predictive``, ``oracle``) live in
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
