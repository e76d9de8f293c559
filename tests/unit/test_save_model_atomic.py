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
