"""DistributedEmbedding in one process: an elastic Keras state commits its tables
whole, restores them, and a re-shard to another layout gives the rank its rows of
the committed tables (and back); training after it equals an unbroken run."""

import keras
import numpy as np
import pytest

import tf_hvd.keras as hk
from tf_hvd._keras import ranks
from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig, TableConfig

V, D = 11, 3


def _model():
    keras.utils.set_random_seed(5)
    table = TableConfig("t", V, D, combiner="mean", initializer="uniform")
    ids = keras.Input((2,), dtype="int32", name="f")
    emb = DistributedEmbedding({"f": FeatureConfig("f", table, (None, 2), (None, D))},
                               name="emb")
    model = keras.Model({"f": ids}, keras.layers.Dense(1)(emb({"f": ids})["f"]))
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.05)), loss="mse")
    return model, emb


def _data(seed):
    rs = np.random.RandomState(seed)
    return {"f": rs.randint(0, V, size=(16, 2))}, rs.randn(16, 1).astype(np.float32)


def _fit(model, seed):
    x, y = _data(seed)
    model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)


def _whole(emb):
    return emb.gather_whole()


@pytest.fixture
def as_rank(monkeypatch):
    def switch(rank, size):
        monkeypatch.setattr(ranks, "rank_size", lambda: (rank, size))
    return switch


def test_commit_restore_and_reshard(as_rank):
    hk.init()
    model, emb = _model()
    _fit(model, 1)
    state = hk.elastic.KerasState(model, epoch=0)
    state.sync()                 # what hvd.elastic.run does first: the tables are taken
    committed = _whole(emb)
    assert sorted(committed) == ["slot:t:momentum", "slot:t:velocity", "table:t"]
    _fit(model, 2)
    state.restore()
    for key, value in _whole(emb).items():
        np.testing.assert_array_equal(value, committed[key])
    # the job re-forms with 2 ranks and this process is rank 1: its rows, new variables
    shard_before = emb._hvd.tables["t"].shard
    as_rank(1, 2)
    emb.reshard()
    emb.load_whole(committed)
    state_t = emb._hvd.tables["t"]
    assert state_t.shard is not shard_before and tuple(state_t.shard.shape) == (5, D)
    np.testing.assert_array_equal(state_t.shard.numpy(), committed["table:t"][1::2])
    np.testing.assert_array_equal(state_t.slots["velocity"].numpy(),
                                  committed["slot:t:velocity"][1::2])
    assert any(v is state_t.shard for v in model.trainable_variables)
    # and back to one rank: whole tables again, training goes on as if unbroken
    as_rank(0, 1)
    state.on_reset()
    state.sync()                 # re-shards and loads the last commit
    assert tuple(emb._hvd.tables["t"].shard.shape) == (V, D)
    _fit(model, 2)
    unbroken, emb2 = _model()
    _fit(unbroken, 1)
    _fit(unbroken, 2)
    for key, value in _whole(emb2).items():
        np.testing.assert_allclose(_whole(emb)[key], value, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(model.layers[-1].get_weights()[0],
                               unbroken.layers[-1].get_weights()[0], rtol=1e-6, atol=1e-7)
