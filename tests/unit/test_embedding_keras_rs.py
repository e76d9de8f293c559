"""A keras-rs model moves by changing its import: DistributedEmbedding takes
keras-rs' own FeatureConfig/TableConfig objects (keras_rs 0.4, tools/requirements.txt)
and its constructor arguments, in one process."""

import keras
import numpy as np

import keras_rs
from tf_hvd.keras.layers import DistributedEmbedding


def _features():
    users = keras_rs.layers.TableConfig("users", vocabulary_size=20, embedding_dim=3,
                                        combiner="sum", optimizer="sgd")
    items = keras_rs.layers.TableConfig("items", vocabulary_size=30, embedding_dim=3)
    return {"user": keras_rs.layers.FeatureConfig("user", users, (4,), (4, 3)),
            "clicked": keras_rs.layers.FeatureConfig("clicked", items, (4, 2), (4, 3)),
            "liked": keras_rs.layers.FeatureConfig("liked", users, (4, 2), (4, 3))}


def test_keras_rs_configs_and_arguments_are_accepted():
    emb = DistributedEmbedding(_features(), table_stacking="auto", update_stats=False)
    emb.build(None)
    assert emb.table_names() == ["items", "users"]    # features in sorted order; "liked" shares users
    users = np.arange(60, dtype=np.float32).reshape(20, 3)
    items = np.arange(90, dtype=np.float32).reshape(30, 3) / 10
    emb.set_table("users", users)
    emb.set_table("items", items)
    ids = {"user": np.array([0, 5, 19, 5]), "clicked": np.array([[1, 2], [3, 3], [0, 29], [7, 8]]),
           "liked": np.array([[1, 2], [3, 3], [0, 19], [7, 8]])}
    out = emb(ids)
    np.testing.assert_allclose(out["user"], users[ids["user"]])
    # keras-rs' default combiner is "mean"; users' is "sum"
    np.testing.assert_allclose(out["clicked"], items[ids["clicked"]].mean(1), rtol=1e-6)
    np.testing.assert_allclose(out["liked"], users[ids["liked"]].sum(1), rtol=1e-6)
    # keras-rs' table optimizers are honoured (its default "adam", "sgd" given here)
    own = {name: type(state.own_optimizer).__name__ for name, state in emb._hvd.tables.items()}
    assert own == {"users": "SGD", "items": "Adam"}


def test_the_layer_saves_as_tf_hvd_configs_and_loads_back():
    emb = DistributedEmbedding(_features(), name="emb")
    again = DistributedEmbedding.from_config(emb.get_config())
    again.build(None)
    assert again.table_names() == ["items", "users"]
    tables = again._table_configs
    assert (tables["users"].vocabulary_size, tables["users"].combiner,
            tables["items"].combiner, tables["items"].sharding) == (20, "sum", "mean", "mod")
    assert type(again._hvd.tables["items"].own_optimizer) is keras.optimizers.Adam
