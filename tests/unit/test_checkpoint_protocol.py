"""tf_hvd.checkpoint's commit protocol in one process (TensorFlow-free): the ranks' parts
of a step written by StepWriters, published after every rank's record, the newest
complete step found (a half-written one ignored, saying so), older steps pruned, each
file's size and CRC-32 checked, and a failed write or a missing rank failing the save
while the previous step stays. Multi-rank use: tests/parallel/test_embedding.py."""

import errno
import logging
import os
import threading
import zlib

import numpy as np
import pytest

from tf_hvd.checkpoint import (Step, StepWriter, complete_steps, partial_dirs, prune,
                               publish)
from tf_hvd.checkpoint import commit
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError


def _write(root, step, token, size=2, ranks=None, value=0.0):
    """Every rank's part (rank r: "r<r>.npy" holding [value + r] * 4), finished."""
    writers = []
    for r in (range(size) if ranks is None else ranks):
        w = StepWriter(root, step, r, size, token)
        w.write_array("part/r%d.npy" % r, np.full(4, value + r))
        w.finish(meta={"rows": 4})
        writers.append(w)
    return writers


def _save(root, step, token="t%d", size=2, keep=2):
    token = token % step if "%" in token else token
    _write(root, step, token, size, value=step * 10.0)
    return publish(root, step, size, token, meta={"epoch": step}, keep=keep)


def test_publish_waits_for_every_rank_then_renames_the_step_with_its_manifest(tmp_path):
    _write(tmp_path, 7, "tk", ranks=[0])
    done = []
    t = threading.Thread(target=lambda: done.append(publish(tmp_path, 7, 2, "tk",
                                                            meta={"epoch": 3}, timeout=30)))
    t.start()
    t.join(0.2)
    assert t.is_alive() and not done
    assert complete_steps(tmp_path) == []     # nothing published before rank 1's record
    assert sorted(os.listdir(tmp_path)) == ["step-00000007.partial-tk"]
    _write(tmp_path, 7, "tk", ranks=[1])
    t.join(30)
    assert done == [str(tmp_path / "step-00000007")]
    assert sorted(os.listdir(tmp_path)) == ["step-00000007"]
    step = Step.newest(tmp_path)
    assert (step.step, step.size, step.meta) == (7, 2, {"epoch": 3})
    part0 = (tmp_path / "step-00000007" / "part" / "r0.npy").read_bytes()
    assert step.files["part/r0.npy"] == {"size": len(part0), "rank": 0,
                                         "crc32": zlib.crc32(part0) & 0xFFFFFFFF}
    assert step.files["part/r1.npy"]["rank"] == 1
    assert step.manifest["ranks_meta"] == {"0": {"rows": 4}, "1": {"rows": 4}}
    np.testing.assert_array_equal(np.load(step.verify("part/r1.npy")), np.full(4, 1.0))


def test_a_half_written_newer_step_is_ignored_with_a_warning(tmp_path, caplog):
    _save(tmp_path, 1)
    _write(tmp_path, 2, "killed", ranks=[0])   # rank 1 never finished, nobody published
    with caplog.at_level(logging.WARNING, logger="tf_hvd"):
        step = Step.newest(tmp_path)
    assert step.step == 1 and step.meta == {"epoch": 1}
    assert [r.getMessage() for r in caplog.records] == [
        "tf_hvd checkpoint: ignoring %s: a half-written step (no manifest; its run stopped "
        "while saving)" % (tmp_path / "step-00000002.partial-killed")]
    np.testing.assert_array_equal(np.load(step.verify("part/r0.npy")), np.full(4, 10.0))


def test_keep_prunes_older_steps_and_other_runs_partial_steps(tmp_path):
    _write(tmp_path, 9, "oldrun", ranks=[0])       # a killed run's step
    for s in (1, 2, 3):
        _save(tmp_path, s, token="run", keep=2)
    _write(tmp_path, 4, "run", ranks=[0])          # this run's next step, under way
    _save(tmp_path, 5, token="run", keep=2)
    assert complete_steps(tmp_path) == [3, 5]
    # the other run's partial step 9 is gone; this run's unpublished step 4 is older
    # than the newest complete step and goes too
    assert partial_dirs(tmp_path) == []
    _write(tmp_path, 6, "run", ranks=[0])
    prune(tmp_path, keep=1, token="run")
    assert complete_steps(tmp_path) == [5]
    assert partial_dirs(tmp_path) == [(6, "step-00000006.partial-run", "run")]


def test_a_truncated_file_is_an_error_naming_it_and_its_sizes(tmp_path):
    _save(tmp_path, 1)
    path = tmp_path / "step-00000001" / "part" / "r1.npy"
    data = path.read_bytes()
    path.write_bytes(data[:-5])
    with pytest.raises(CheckpointError) as e:
        Step.newest(tmp_path).verify("part/r1.npy")
    assert str(e.value) == ("checkpoint file %s has %d bytes, its manifest says %d "
                            "(truncated or overwritten)" % (path, len(data) - 5, len(data)))


def test_a_flipped_byte_is_an_error_naming_the_file_and_both_crcs(tmp_path):
    _save(tmp_path, 1)
    path = tmp_path / "step-00000001" / "part" / "r0.npy"
    data = bytearray(path.read_bytes())
    good = zlib.crc32(bytes(data)) & 0xFFFFFFFF
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError) as e:
        Step.newest(tmp_path).verify("part/r0.npy")
    assert str(e.value) == ("checkpoint file %s is corrupted: its CRC-32 is %08x, its "
                            "manifest says %08x" % (path, zlib.crc32(bytes(data)), good))


def test_a_file_the_manifest_does_not_list_is_an_error_listing_what_it_has(tmp_path):
    _save(tmp_path, 1)
    with pytest.raises(CheckpointError) as e:
        Step.newest(tmp_path).verify("part/r2.npy")
    assert str(e.value) == ("checkpoint step 1 (%s) has no file part/r2.npy; it has "
                            "part/r0.npy, part/r1.npy" % (tmp_path / "step-00000001"))


def test_a_ranks_failed_part_makes_publish_raise_naming_the_rank(tmp_path):
    _save(tmp_path, 1)
    _write(tmp_path, 2, "t2", ranks=[0])
    StepWriter(tmp_path, 2, 1, 2, "t2").fail(OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(CheckpointSaveError) as e:
        publish(tmp_path, 2, 2, "t2", timeout=30)
    assert str(e.value) == ("checkpoint step 2 is not published: rank 1 could not write its "
                            "part: [Errno 28] No space left on device")
    assert complete_steps(tmp_path) == [1]


def test_a_rank_that_never_finishes_times_out_naming_it(tmp_path):
    _write(tmp_path, 3, "t3", size=3, ranks=[0, 2])
    with pytest.raises(CheckpointSaveError) as e:
        publish(tmp_path, 3, 3, "t3", timeout=0.1)
    assert str(e.value) == ("checkpoint step 3 is not published: rank(s) 1 did not finish "
                            "their part within 0 s (%s)" % (tmp_path / "step-00000003.partial-t3"))
    assert complete_steps(tmp_path) == []


def test_a_full_disk_fails_the_save_naming_the_path_and_the_previous_step_stays(
        tmp_path, monkeypatch):
    _save(tmp_path, 1)

    def no_space(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", path)
    writer = StepWriter(tmp_path, 2, 0, 1, "t2")
    monkeypatch.setattr(commit, "open", no_space, raising=False)
    with pytest.raises(CheckpointSaveError) as e:
        writer.write_array("part/r0.npy", np.zeros(4))
    monkeypatch.undo()
    assert str(e.value) == (
        "saving checkpoint step 2: rank 0 cannot write %s (No space left on device); the "
        "step is not published and the previous complete step stays"
        % (tmp_path / "step-00000002.partial-t2" / "part" / "r0.npy"))
    step = Step.newest(tmp_path)
    assert step.step == 1
    np.testing.assert_array_equal(np.load(step.verify("part/r0.npy")), np.full(4, 10.0))


def test_a_full_disk_while_publishing_names_the_manifest_and_keeps_the_previous_step(
        tmp_path, monkeypatch):
    _save(tmp_path, 1)
    _write(tmp_path, 2, "t2")
    real = commit.write_json_atomically

    def no_space(path, value):
        if path.endswith("manifest.json"):
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(path, value)
    monkeypatch.setattr(commit, "write_json_atomically", no_space)
    with pytest.raises(CheckpointSaveError) as e:
        publish(tmp_path, 2, 2, "t2", timeout=30)
    assert str(e.value) == (
        "checkpoint step 2 is not published: cannot write %s (No space left on device); "
        "the previous complete step stays"
        % (tmp_path / "step-00000002.partial-t2" / "manifest.json"))
    assert Step.newest(tmp_path, say_ignored=False).step == 1


def test_a_root_that_cannot_be_a_directory_fails_naming_the_path(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    root = tmp_path / "file" / "ckpt"
    with pytest.raises(CheckpointSaveError) as e:
        StepWriter(root, 1, 0, 1, "t1")
    assert str(e.value) == (
        "saving checkpoint step 1: rank 0 cannot write %s (Not a directory); the step is "
        "not published and the previous complete step stays"
        % (root / "step-00000001.partial-t1"))


def test_a_manifest_that_cannot_be_read_is_an_error_naming_it(tmp_path):
    _save(tmp_path, 1)
    manifest = tmp_path / "step-00000001" / "manifest.json"
    manifest.write_text("{not json")
    with pytest.raises(CheckpointError) as e:
        Step.newest(tmp_path)
    assert str(e.value).startswith("checkpoint step 1: cannot read its manifest %s ("
                                   % manifest)
