"""Keras layers of tf_hvd: ``DistributedEmbedding``, whose tables are sharded
over the ranks, with keras-rs' ``FeatureConfig`` and ``TableConfig`` (keras-rs'
own config objects are accepted too, so a keras-rs model moves by changing
its import). docs/recommenders.md is the user's guide.

    import tf_hvd.keras as hvd
    from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig

    hvd.init()
    items = TableConfig("items", vocabulary_size=10**6, embedding_dim=64, combiner="sum")
    embedding = DistributedEmbedding({"item": FeatureConfig("item", items, (None, 8), (None, 64))})
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adagrad(0.05)), ...)
    hvd.save_model(model, "model.keras")              # whole tables, every rank calls it
    save_embedding_shards(model, "tables/")           # or: each rank writes its rows
"""

from tf_hvd._keras.embedding.checkpoint import load_shards as load_embedding_shards
from tf_hvd._keras.embedding.checkpoint import save_shards as save_embedding_shards
from tf_hvd._keras.embedding.config import FeatureConfig, TableConfig
from tf_hvd._keras.embedding.layer import DistributedEmbedding

__all__ = ["DistributedEmbedding", "FeatureConfig", "TableConfig",
           "save_embedding_shards", "load_embedding_shards"]
