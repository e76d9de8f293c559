"""hvd.save_model commits its file whole (one process): Keras writes a temporary beside
the path, with the path's extension, which is then renamed onto it; a failed write
raises CheckpointSaveError naming the path and keeps the previous file."""

import errno
import os

import keras
import numpy as np
import pytest

from one_process import initialized  # noqa: F401 (hvd.init() once, autouse)
from one_process import small_model

import tf_hvd.keras as hk
from tf_hvd.exceptions import CheckpointSaveError


def _weights(path):
    return [w for w in keras.models.load_model(path, compile=False).get_weights()]


@pytest.mark.parametrize("name", ["model.keras", "model.h5"])
def test_save_model_replaces_the_file_through_a_temporary_with_its_extension(
        tmp_path, monkeypatch, name):
    path = str(tmp_path / name)
    model = small_model(seed=1)
    hk.save_model(model, path)
    first = _weights(path)
    seen = []
    real = type(model).save

    def save(self, filepath, **kwargs):
        seen.append((filepath, kwargs, os.path.exists(path)))
        return real(self, filepath, **kwargs)
    monkeypatch.setattr(type(model), "save", save)
    model.set_weights([w + 1.0 for w in model.get_weights()])
    hk.save_model(model, path, include_optimizer=False)
    (tmp, kwargs, previous_there), = seen
    assert os.path.dirname(tmp) == str(tmp_path)
    assert os.path.basename(tmp).startswith(".model.tmp-")
    assert tmp.endswith(os.path.splitext(name)[1])       # Keras picks the format from it
    assert kwargs == {"include_optimizer": False} and previous_there
    assert os.listdir(tmp_path) == [name]
    for got, before in zip(_weights(path), first):
        np.testing.assert_array_equal(got, before + 1.0)


def test_a_failed_save_keeps_the_previous_file_and_names_the_path(tmp_path, monkeypatch):
    path = str(tmp_path / "model.keras")
    model = small_model(seed=2)
    hk.save_model(model, path)
    with open(path, "rb") as f:
        previous = f.read()
    real = type(model).save

    def full_disk(self, filepath, **kwargs):
        real(self, filepath, **kwargs)
        with open(filepath, "r+b") as f:     # half of it written when the disk filled
            f.truncate(os.path.getsize(filepath) // 2)
        raise OSError(errno.ENOSPC, "No space left on device", filepath)
    monkeypatch.setattr(type(model), "save", full_disk)
    with pytest.raises(CheckpointSaveError) as e:
        hk.save_model(model, path)
    assert str(e.value) == ("cannot save %s (No space left on device); the previous file "
                            "stays" % path)
    assert os.listdir(tmp_path) == ["model.keras"]
    with open(path, "rb") as f:
        assert f.read() == previous
    monkeypatch.undo()
    for got, saved in zip(_weights(path), model.get_weights()):
        np.testing.assert_array_equal(got, saved)


def test_the_spark_trainers_epoch_checkpoint_is_committed_and_read_back_checked(tmp_path):
    """The Spark estimator's path without Spark: rank 0's callback commits the model to
    the store after an epoch; the bytes read back (checked) load as that model, and a
    truncated checkpoint is a CheckpointError naming it."""
    pytest.importorskip("pyspark")   # tf_hvd.spark.keras needs it
    from tf_hvd.exceptions import CheckpointError
    from tf_hvd.spark.keras import trainer
    from tf_hvd.spark.store import Store
    store = Store.create(str(tmp_path / "store"))
    model = small_model(seed=3)
    callback = trainer._checkpoint_callback(store, "r1")
    callback.set_model(model)
    callback.on_epoch_end(0)
    path = store.get_checkpoint_path("r1")
    loaded = trainer.model_from_bytes(store.read_bytes(path, require_manifest=True),
                                      compile=False)
    for got, saved in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(got, saved)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - 1)
    with pytest.raises(CheckpointError) as e:
        store.read_bytes(path, require_manifest=True)
    assert str(e.value) == ("checkpoint file %s has %d bytes, its manifest says %d "
                            "(truncated or overwritten)" % (path, size - 1, size))
