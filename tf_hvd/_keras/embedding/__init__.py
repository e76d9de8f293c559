"""DistributedEmbedding's parts: table and feature configs (config.py), which rank
owns which row (tf_hvd._keras.sharded_state.row_layout, shared with the sharded
optimizer), the alltoall lookup
(exchange.py), the sparse row updates (sparse_rules.py), the layer (layer.py: its
Keras surface; tables.py: a table's state on this rank; features.py: the inputs;
table_checks.py: the ranks describe the same tables; sparse_updates.py: the
optimizer's side; whole_tables.py: whole tables and the sharded-state protocol;
feature_configs.py: its features in its config), where this rank stands (ranks.py
of tf_hvd._keras) and its checkpoints (checkpoint.py). The public names are in
tf_hvd.keras.layers::

    from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig
"""
