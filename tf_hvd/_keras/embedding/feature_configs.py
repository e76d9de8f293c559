"""A DistributedEmbedding's feature configs in its Keras config and back: each
FeatureConfig as a dict marked ``_feature``, in the structure the layer was given.

    config = feature_config(FeatureConfig("item", table))   # a dict, JSON-able
    map_feature_dicts(FeatureConfig.from_config, {"item": config})
"""

from tf_hvd._keras.embedding import config as config_lib


def feature_config(feature):
    """``feature`` (ours, keras-rs' or alike) as a marked dict."""
    table = config_lib.as_table_config(feature.table)
    return {"name": feature.name, "table": table.get_config(),
            "input_shape": config_lib.shape_list(getattr(feature, "input_shape", None)),
            "output_shape": config_lib.shape_list(getattr(feature, "output_shape", None)),
            "_feature": True}


def map_feature_dicts(fn, structure):
    """``structure`` with ``fn(dict)`` in place of each marked feature dict (unmarked)."""
    if isinstance(structure, dict) and structure.get("_feature"):
        c = dict(structure)
        c.pop("_feature")
        return fn(c)
    if isinstance(structure, dict):
        return {k: map_feature_dicts(fn, v) for k, v in structure.items()}
    if isinstance(structure, (list, tuple)):
        return type(structure)(map_feature_dicts(fn, v) for v in structure)
    return structure
