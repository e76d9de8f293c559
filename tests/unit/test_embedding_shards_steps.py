"""save_embedding_shards / load_embedding_shards in one process: each save a new step
(the ``keep`` newest stay), a load takes the newest, and a directory that cannot hold
steps or holds none is an error naming it. The ranks' parts, a failed rank and re-sharding
at np=2 and 3: tests/parallel/test_embedding.py."""

import keras
import numpy as np
import pytest

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)

import tf_hvd.keras as hk
from tf_hvd.checkpoint import Step, complete_steps
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError
from tf_hvd.keras.layers import (DistributedEmbedding, FeatureConfig, TableConfig,
                                 load_embedding_shards, save_embedding_shards)

V, D = 11, 3


def _model(seed):
    keras.utils.set_random_seed(seed)
    table = TableConfig("t", V, D, combiner="mean", initializer="uniform")
    ids = keras.Input((2,), dtype="int32", name="f")
    emb = DistributedEmbedding({"f": FeatureConfig("f", table, (None, 2), (None, D))},
                               name="emb")
    model = keras.Model({"f": ids}, keras.layers.Dense(1)(emb({"f": ids})["f"]))
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.05)), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model, emb


def test_each_save_is_a_new_step_and_a_load_takes_the_newest(tmp_path):
    model, emb = _model(1)
    for k in range(3):
        emb.set_table("t", np.full((V, D), float(k), np.float32))
        save_embedding_shards(model, tmp_path, keep=2)
    assert complete_steps(tmp_path) == [1, 2]
    step = Step.newest(tmp_path)
    assert step.meta == {"size": 1, "layers": {"emb": {"t": {
        "vocabulary_size": V, "embedding_dim": D,
        "saved": ["table", "momentum", "velocity"]}}}}
    assert sorted(step.files) == ["emb/t.%s.0-of-1.npy" % w
                                  for w in ("ids", "momentum", "table", "velocity")]
    fresh, emb2 = _model(2)
    load_embedding_shards(fresh, tmp_path)
    np.testing.assert_array_equal(emb2.get_table("t"), np.full((V, D), 2.0, np.float32))


def test_a_directory_under_a_file_fails_the_save_naming_it(tmp_path):
    (tmp_path / "file").write_text("x")
    model, _ = _model(1)
    with pytest.raises(CheckpointSaveError) as e:
        save_embedding_shards(model, tmp_path / "file" / "tables")
    assert str(e.value) == ("save_embedding_shards: cannot save under %s (Not a directory)"
                            % (tmp_path / "file" / "tables"))


def test_a_directory_without_a_checkpoint_is_an_error_naming_it(tmp_path):
    model, _ = _model(1)
    with pytest.raises(CheckpointError) as e:
        load_embedding_shards(model, tmp_path)
    assert str(e.value) == ("load_embedding_shards: %s holds no complete checkpoint step "
                            "(and no manifest.json)" % tmp_path)
