"""The one protocol for sharded state, in one process: both holders (a sharded
DistributedOptimizer, DistributedEmbedding) carry the marker and offer the protocol;
one row layout (numpy and TF ops agree); one pre-reduced rule (a mixture is a
ShardingError for both optimizers); a table's initial rows depend on the seed and the
row id, not on the number of ranks (ranks simulated at np=1, 2, 3), and equal keras-rs'
CPU layer's table for the same initializer and seed."""

import keras
import keras_rs
import numpy as np
import pytest
import tensorflow as tf

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)

import tf_hvd as hvd
import tf_hvd.keras as hk
from tf_hvd._keras import ranks
from tf_hvd._keras.sharded_state import initial_rows, protocol
from tf_hvd._keras.sharded_state.row_layout import RowLayout
from tf_hvd.exceptions import ShardingError
from tf_hvd.keras.layers import DistributedEmbedding, FeatureConfig
from tf_hvd.tape import REDUCED_MARK


def _tables():
    """keras-rs configs (tf_hvd's layer takes them) with seeded initializers; glorot's
    scale depends on the table's rows, truncated normal draws by rejection."""
    def table(name, vocab, dim, init):
        return keras_rs.layers.TableConfig(name, vocabulary_size=vocab, embedding_dim=dim,
                                           initializer=init)
    return [table("uniform", 50, 4, keras.initializers.RandomUniform(seed=7)),
            table("glorot", 31, 3, keras.initializers.GlorotUniform(seed=3)),
            table("truncated", 17, 5, keras.initializers.TruncatedNormal(seed=11)),
            table("default", 23, 2, keras.initializers.VarianceScaling(mode="fan_out",
                                                                       seed=5))]


def _features(tables):
    return {t.name: keras_rs.layers.FeatureConfig(t.name, t, (2,), (2, t.embedding_dim))
            for t in tables}


@pytest.fixture
def as_rank(monkeypatch):
    def switch(rank, size):
        monkeypatch.setattr(ranks, "rank_size", lambda: (rank, size))
    return switch


def _whole_tables(features, size, as_rank, sharding="mod"):
    """Each table as np ranks would hold it (each simulated rank builds its layer),
    put back in global row order."""
    whole = {}
    for rank in range(size):
        as_rank(rank, size)
        emb = DistributedEmbedding(features, table_sharding={
            name: sharding for name in features})
        emb.build(None)
        for name, state in emb._hvd.tables.items():
            full = whole.setdefault(name, np.full(
                (state.layout.vocabulary_size, int(state.config.embedding_dim)), np.nan,
                dtype=np.float32))
            full[state.layout.global_ids(rank)] = state.shard.numpy()
    return whole


def test_both_holders_carry_the_marker_and_offer_the_protocol():
    table = keras_rs.layers.TableConfig("t", vocabulary_size=5, embedding_dim=2)
    emb = DistributedEmbedding(FeatureConfig("f", table, (2,), (2, 2)))
    ids = keras.Input((), dtype="int32")
    model = keras.Model(ids, keras.layers.Dense(1)(emb(ids)))
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.1), sharded=True)
    plain = hk.DistributedOptimizer(keras.optimizers.Adam(0.1))
    for holder in (emb, opt):
        assert protocol.holds_sharded_state(holder)
        assert protocol.missing_methods(holder) == []
    assert not protocol.holds_sharded_state(plain)
    assert protocol.holders(model, opt) == [emb, opt]     # layers first, the same everywhere
    assert protocol.holders(model, plain) == [emb]


@pytest.mark.parametrize("mode", ["mod", "range"])
@pytest.mark.parametrize("vocab,n", [(10, 3), (2, 3), (1000, 7)])
def test_the_row_layout_in_tf_ops_is_the_numpy_one(mode, vocab, n):
    layout = RowLayout(vocab, n, mode)
    ids = np.arange(vocab, dtype=np.int64)
    owner, local = layout.locate(tf.constant(ids), tf)
    np.testing.assert_array_equal(owner.numpy(), layout.owner(ids))
    np.testing.assert_array_equal(local.numpy(), layout.local_row(ids))
    whole = np.arange(vocab)
    for q in range(n):
        np.testing.assert_array_equal(layout.rows_of(whole, q), layout.global_ids(q))


def _marked(value):
    t = tf.constant(value)
    setattr(t, REDUCED_MARK, True)
    return t


def test_a_mixture_of_averaged_gradients_is_refused_by_the_sharded_optimizer():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1), sharded=True)
    kernel, bias = model.trainable_variables
    grads = [_marked(np.ones((3, 2), np.float32)), tf.ones([2])]
    with pytest.raises(ShardingError, match="^sharded optimizer: some gradients were "
                                            "averaged by a DistributedGradientTape"):
        opt.apply_gradients(zip(grads, [kernel, bias]))


def test_a_mixture_of_averaged_gradients_is_refused_beside_table_rows():
    table = keras_rs.layers.TableConfig("t", vocabulary_size=5, embedding_dim=3)
    emb = DistributedEmbedding(FeatureConfig("f", table, (2,), (2, 3)))
    ids = keras.Input((), dtype="int32")
    model = keras.Model(ids, keras.layers.Dense(2)(emb(ids)))
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1))
    shard, kernel, bias = model.trainable_variables
    table_grad = tf.IndexedSlices(tf.ones([1, 3]), tf.constant([1]))
    mixed = [table_grad, _marked(np.ones((3, 2), np.float32)), tf.ones([2])]
    with pytest.raises(ShardingError, match="^DistributedOptimizer: some gradients were "
                                            "averaged by a DistributedGradientTape"):
        opt.apply_gradients(zip(mixed, [shard, kernel, bias]))
    # all averaged by the tape (the table's rows are not asked): applied as they are
    before = kernel.numpy().copy()
    opt.apply_gradients(zip([table_grad, _marked(np.ones((3, 2), np.float32)),
                             _marked(np.ones(2, np.float32))], [shard, kernel, bias]))
    np.testing.assert_allclose(kernel.numpy(), before - 0.1, rtol=1e-6)


@pytest.mark.parametrize("sharding", ["mod", "range"])
def test_initial_rows_are_the_same_at_np_1_2_and_3_and_equal_keras_rs(as_rank, sharding):
    tables = _tables()
    features = _features(tables)
    rs = keras_rs.layers.DistributedEmbedding(features)
    rs({name: np.array([0, 1]) for name in features})     # builds its CPU tables
    expected = {name: np.asarray(v) for name, v in rs.get_embedding_tables().items()}
    one = _whole_tables(features, 1, as_rank, sharding)
    for name in expected:
        np.testing.assert_array_equal(one[name], expected[name], err_msg=name)
    for size in (2, 3):
        at = _whole_tables(features, size, as_rank, sharding)
        for name in expected:
            np.testing.assert_array_equal(at[name], one[name],
                                          err_msg="%s at np=%d" % (name, size))


def test_a_table_of_several_blocks_is_the_same_at_np_1_2_and_3(as_rank, monkeypatch):
    # 40 elements a block: the 50 x 4 table is 5 blocks of 10 rows, drawn with seeds
    # derived from (seed, block); only block 0 is a prefix of keras-rs' one-call draw
    monkeypatch.setattr(initial_rows, "ELEMENTS_PER_BLOCK", 40)
    tables = _tables()
    features = _features(tables)
    one = _whole_tables(features, 1, as_rank)
    for size in (2, 3):
        at = _whole_tables(features, size, as_rank, "range" if size == 3 else "mod")
        for name in one:
            np.testing.assert_array_equal(at[name], one[name],
                                          err_msg="%s at np=%d" % (name, size))
    uniform = tables[0].initializer
    np.testing.assert_array_equal(one["uniform"][:10], np.asarray(uniform((50, 4)))[:10])
    assert not np.array_equal(one["uniform"][10:], np.asarray(uniform((50, 4)))[10:])
    # glorot scales by the whole table's fans, not a block's: the same bound
    limit = np.sqrt(6.0 / (31 + 3))
    assert np.abs(one["glorot"]).max() <= limit and np.abs(one["glorot"]).max() > 0.8 * limit


def test_a_checkpoint_keeps_the_step_counts_of_tables_with_their_own_optimizer(tmp_path):
    def model_and_layer():
        table = keras_rs.layers.TableConfig("t", vocabulary_size=6, embedding_dim=2,
                                            optimizer="adam")
        emb = DistributedEmbedding(FeatureConfig("f", table, (4,), (4, 2)), name="emb")
        ids = keras.Input((), dtype="int32")
        model = keras.Model(ids, keras.layers.Dense(1)(emb(ids)))
        model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)),
                      loss="mse")
        return model, emb
    model, emb = model_and_layer()
    model.fit(np.array([0, 1, 2, 5]), np.ones((4, 1)), batch_size=2, epochs=1, verbose=0)
    assert emb.own_steps() == {"t": 2}
    hvd.Checkpointer(str(tmp_path), model).save(2)
    again, emb_again = model_and_layer()
    assert emb_again.own_steps() == {"t": 0}
    hvd.Checkpointer(str(tmp_path), again).restore()
    assert emb_again.own_steps() == {"t": 2}
    np.testing.assert_array_equal(emb_again.get_table("t"), emb.get_table("t"))
