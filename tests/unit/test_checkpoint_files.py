"""Checkpoints that are one file at a fixed path (tf_hvd.checkpoint.atomic), as the Spark
store commits them: written under a temporary name and moved onto the path, a size and
CRC-32 sidecar written last and checked by the reader; on a local path and on an fsspec
URL (``memory://``). TensorFlow-free; hvd.save_model's use is in test_save_model_atomic.py."""

import errno
import json
import os
import uuid
import zlib

import pytest

from tf_hvd.checkpoint import atomic
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError
from tf_hvd.spark.store import LocalStore, Store


def _entry(data):
    return {"size": len(data), "crc32": zlib.crc32(data) & 0xFFFFFFFF}


def test_replace_file_keeps_the_extension_and_leaves_only_the_new_file(tmp_path):
    path = tmp_path / "model.keras"
    path.write_bytes(b"old")
    with atomic.replace_file(path) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path)
        assert os.path.basename(tmp).startswith(".model.tmp-") and tmp.endswith(".keras")
        assert path.read_bytes() == b"old"       # the previous file stays meanwhile
        with open(tmp, "wb") as f:
            f.write(b"new")
    assert path.read_bytes() == b"new"
    assert os.listdir(tmp_path) == ["model.keras"]


def test_a_failed_write_keeps_the_previous_file_and_removes_the_temporary(tmp_path):
    path = tmp_path / "model.h5"
    path.write_bytes(b"previous")
    with pytest.raises(CheckpointSaveError) as e:
        with atomic.replace_file(path) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half")
            raise OSError(errno.ENOSPC, "No space left on device", tmp)
    assert str(e.value) == ("cannot save %s (No space left on device); the previous file "
                            "stays" % path)
    assert path.read_bytes() == b"previous"
    assert os.listdir(tmp_path) == ["model.h5"]


@pytest.fixture(params=["local", "url"])
def store(request, tmp_path):
    if request.param == "local":
        return LocalStore(str(tmp_path / "store"))
    return Store.create("memory://tf_hvd_test_%s" % uuid.uuid4().hex[:8])


def _files(store, run_id="r1"):
    return sorted(os.path.basename(p) for p in store.fs.ls(store.get_run_path(run_id),
                                                            detail=False))


def test_the_store_commits_a_checkpoint_with_its_sidecar_last(store):
    path = store.get_checkpoint_path("r1")
    assert path == store.prefix_path + "/runs/r1/checkpoint.keras"   # Horovod's path
    store.write_bytes(path, b"epoch 1")
    store.write_bytes(path, b"epoch two")
    assert _files(store) == ["checkpoint.keras", "checkpoint.keras.manifest.json"]
    with store.fs.open(path + ".manifest.json", "rb") as f:
        assert json.loads(f.read()) == {"format": 1, "accept": [_entry(b"epoch two")]}
    assert store.read_bytes(path, require_manifest=True) == b"epoch two"


def test_a_truncated_store_checkpoint_is_an_error_naming_the_file(store):
    path = store.get_checkpoint_path("r1")
    store.write_bytes(path, b"0123456789")
    with store.fs.open(path, "wb") as f:
        f.write(b"01234")
    with pytest.raises(CheckpointError) as e:
        store.read_bytes(path, require_manifest=True)
    assert str(e.value) == ("checkpoint file %s has 5 bytes, its manifest says 10 "
                            "(truncated or overwritten)" % path)


def test_a_corrupted_store_checkpoint_is_an_error_naming_the_file(store):
    path = store.get_checkpoint_path("r1")
    store.write_bytes(path, b"0123456789")
    with store.fs.open(path, "wb") as f:
        f.write(b"0123456780")
    with pytest.raises(CheckpointError) as e:
        store.read_bytes(path)
    assert str(e.value) == ("checkpoint file %s is corrupted: its CRC-32 is %08x, its "
                            "manifest says %08x" % (path, zlib.crc32(b"0123456780"),
                                                    zlib.crc32(b"0123456789")))


def test_a_checkpoint_without_its_sidecar_is_read_as_before_unless_required(store):
    path = store.get_checkpoint_path("r1")
    store.fs.makedirs(store.get_run_path("r1"), exist_ok=True)
    with store.fs.open(path, "wb") as f:
        f.write(b"written before")
    assert store.read_bytes(path) == b"written before"
    with pytest.raises(CheckpointError) as e:
        store.read_bytes(path, require_manifest=True)
    assert str(e.value) == ("checkpoint file %s has no manifest %s.manifest.json: it was "
                            "not committed (or was written before tf_hvd committed "
                            "checkpoints)" % (path, path))


def test_a_commit_stopped_before_or_after_its_rename_reads_whole(tmp_path, monkeypatch):
    """Killed between its steps, a commit leaves the previous or the new file, and the
    sidecar accepts whichever is in place."""
    path = str(tmp_path / "checkpoint.keras")
    atomic.write_verified(path, b"old model")

    real = os.replace

    def killed(src, dst):   # stopped at the file's rename; the sidecar is widened
        if dst == path:
            raise OSError(errno.EIO, "killed")
        return real(src, dst)
    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(CheckpointSaveError):
        atomic.write_verified(path, b"new model!")
    monkeypatch.undo()
    assert atomic.read_verified(path, require=True) == b"old model"
    with open(path + ".manifest.json") as f:
        assert json.load(f)["accept"] == [_entry(b"new model!"), _entry(b"old model")]
    # a rename done but the last sidecar not yet written
    with open(path, "wb") as f:
        f.write(b"new model!")
    assert atomic.read_verified(path, require=True) == b"new model!"
    assert sorted(os.listdir(tmp_path)) == ["checkpoint.keras",
                                            "checkpoint.keras.manifest.json"]


def test_a_store_that_cannot_be_written_fails_naming_the_path(tmp_path):
    (tmp_path / "file").write_text("x")
    store = LocalStore(str(tmp_path / "file" / "store"))
    path = store.get_checkpoint_path("r1")
    with pytest.raises(CheckpointSaveError) as e:
        store.write_bytes(path, b"model")
    assert str(e.value) == "cannot save %s (Not a directory); the previous file stays" % path
