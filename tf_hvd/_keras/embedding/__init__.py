"""DistributedEmbedding's parts: table and feature configs (config.py), which rank
owns which row (tf_hvd._keras.sharded_state.row_layout, shared with the sharded
optimizer), the alltoall lookup
(exchange.py), the sparse row updates (sparse_rules.py), the layer (layer.py)
and its checkpoints (checkpoint.py). The public names are in tf_hvd.keras.layers::

    from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig
"""
