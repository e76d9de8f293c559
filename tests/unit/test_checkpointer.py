"""hvd.Checkpointer and hvd.callbacks.BackupAndRestore in one process (no hvd.init(): one
rank): what a step restores, and the bad input each names (another model, another
optimizer, a corrupted or truncated file, a half-written newer step, a failed save).
Many ranks, kills and restarts: tests/parallel/test_checkpoint_chaos.py."""

import errno
import logging
import os
import re

import keras
import numpy as np
import pytest

from one_process import initialized  # noqa: F401 (hvd.init(), a job of one rank)
import tf_hvd as hvd
import tf_hvd.keras as hk
from tf_hvd.checkpoint import commit, complete_steps, partial_dirs
from tf_hvd.exceptions import CheckpointError

X = np.random.RandomState(0).randn(16, 3).astype(np.float32)
Y = X.sum(axis=1, keepdims=True).astype(np.float32)


def _model(extra=False, optimizer="adam"):
    layers = [keras.Input((3,)), keras.layers.Dense(4, activation="tanh", name="hidden")]
    if extra:
        layers.append(keras.layers.Dense(2, name="wide"))
    layers.append(keras.layers.Dense(1, name="out"))
    model = keras.Sequential(layers, name="m")
    opt = keras.optimizers.Adam(0.05) if optimizer == "adam" else keras.optimizers.SGD(0.05)
    model.compile(optimizer=hk.DistributedOptimizer(opt), loss="mse")
    return model


def _saved(tmp_path, steps=(1, 2)):
    keras.utils.set_random_seed(3)
    model = _model()
    model.fit(X, Y, batch_size=8, epochs=1, verbose=0)
    ckpt = hvd.Checkpointer(tmp_path, model)
    for step in steps:
        ckpt.save(step, epoch=step)
    return model


def test_a_step_restores_weights_optimizer_and_counters(tmp_path):
    saved = _saved(tmp_path)
    keras.utils.set_random_seed(4)
    fresh = _model()
    meta = hvd.Checkpointer(tmp_path, fresh).restore()
    assert meta == {"step": 2, "epoch": 2}
    for a, b in zip(saved.variables + saved.optimizer.variables,
                    fresh.variables + fresh.optimizer.variables):
        assert np.array_equal(np.asarray(a), np.asarray(b)), a.path
    assert complete_steps(tmp_path) == [1, 2]
    assert hvd.Checkpointer(tmp_path / "none", fresh).restore() == {}


def test_another_model_is_an_error_naming_the_file_and_the_variables(tmp_path):
    _saved(tmp_path)
    with pytest.raises(CheckpointError) as e:
        hvd.Checkpointer(tmp_path, _model(extra=True)).restore()
    path = os.path.join(str(tmp_path), "step-00000002", "model.npz")
    assert str(e.value) == (
        "checkpoint file %s does not match the model (a checkpoint of another model?): "
        "missing m/wide/kernel, m/wide/bias" % path)


def test_another_optimizer_is_an_error_naming_both(tmp_path):
    _saved(tmp_path)
    with pytest.raises(CheckpointError) as e:
        hvd.Checkpointer(tmp_path, _model(optimizer="sgd")).restore()
    assert str(e.value) == (
        "checkpoint file %s holds the state of optimizer Adam (10 variables), the model's "
        "optimizer is SGD with 2" % os.path.join(str(tmp_path), "step-00000002",
                                                 "model.npz"))


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_file_is_an_error_naming_it(tmp_path, damage):
    _saved(tmp_path)
    path = os.path.join(str(tmp_path), "step-00000002", "model.npz")
    data = bytearray(open(path, "rb").read())
    if damage == "flip":
        data[len(data) // 2] ^= 0x40
    else:
        data = data[:-100]
    open(path, "wb").write(bytes(data))
    with pytest.raises(CheckpointError) as e:
        hvd.Checkpointer(tmp_path, _model()).restore()
    if damage == "flip":
        # model.npz is checked member by member, each against its CRC-32 in the manifest
        assert re.match(r"checkpoint file %s is corrupted: its member (model|optimizer)/\d{5}"
                        r"\.npy does not have the CRC-32 [0-9a-f]{8} its manifest says$"
                        % re.escape(path), str(e.value)), str(e.value)
    else:
        assert str(e.value) == ("checkpoint file %s has %d bytes, its manifest says %d "
                                "(truncated or overwritten)" % (path, len(data),
                                                                len(data) + 100))


def test_a_half_written_newer_step_is_ignored_saying_so(tmp_path, caplog):
    _saved(tmp_path)
    writer = commit.StepWriter(tmp_path, 3, 0, 1, "deadrun")
    writer.write_arrays("model.npz", {"garbage": np.zeros(3)})
    with caplog.at_level(logging.WARNING, logger="tf_hvd"):
        meta = hvd.Checkpointer(tmp_path, _model()).restore()
    assert meta["step"] == 2
    assert ("tf_hvd checkpoint: ignoring %s: a half-written step (no manifest; its run "
            "stopped while saving)" % os.path.join(str(tmp_path), "step-00000003.partial-"
                                                   "deadrun")) in caplog.messages


def test_a_failed_save_keeps_the_previous_step_and_training_goes_on(tmp_path, caplog,
                                                                    monkeypatch):
    keras.utils.set_random_seed(3)
    model = _model()
    real = commit.zipfile.ZipFile
    calls = {"n": 0}

    def full_disk(*args, **kwargs):  # the third save's model.npz finds the disk full
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)
    monkeypatch.setattr(commit.zipfile, "ZipFile", full_disk)
    backup = hk.callbacks.BackupAndRestore(tmp_path, save_freq=1, delete_checkpoint=False)
    with caplog.at_level(logging.WARNING, logger="tf_hvd"):
        history = model.fit(X, Y, batch_size=4, epochs=1, verbose=0, callbacks=[backup])
    assert len(history.history["loss"]) == 1  # the fit went on to its end
    failed = [m for m in caplog.messages if "No space left" in m]
    assert failed == [
        "tf_hvd BackupAndRestore: saving checkpoint step 3: rank 0 cannot write %s (No "
        "space left on device); the step is not published and the previous complete step "
        "stays; training goes on" % os.path.join(str(tmp_path), "step-00000003.partial-%s"
                                                 % backup._ckpt._token, "model.npz")]
    # step 3's partial directory went with step 4's publication; keep=2
    commit.wait_pruned()
    assert complete_steps(tmp_path) == [2, 4] and partial_dirs(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["step-00000002", "step-00000004"]


def test_backup_and_restore_resumes_mid_epoch_with_the_weights_of_an_unbroken_fit(tmp_path):
    def fit(epochs, directory, stop_after=None):
        keras.utils.set_random_seed(5)
        model = _model()
        backup = hk.callbacks.BackupAndRestore(directory, save_freq=1,
                                               delete_checkpoint=False)

        class Stop(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if stop_after is not None and backup._step == stop_after:
                    raise KeyboardInterrupt("stopped")
        try:
            model.fit(X, Y, batch_size=4, epochs=epochs, shuffle=False, verbose=0,
                      callbacks=[backup, Stop()])
        except KeyboardInterrupt:
            pass
        return model, backup

    plain, _ = fit(3, tmp_path / "plain")
    fit(3, tmp_path / "broken", stop_after=6)          # epoch 1, 2 of its 4 batches
    resumed, backup = fit(3, tmp_path / "broken")
    assert backup._step == 12
    for a, b in zip(plain.variables + plain.optimizer.variables,
                    resumed.variables + resumed.optimizer.variables):
        assert np.array_equal(np.asarray(a), np.asarray(b)), a.path
