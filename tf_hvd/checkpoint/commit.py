"""Writing one checkpoint step so that it is complete or absent.

Every rank writes its files into the step's *partial* directory
(``step-00000012.partial-<token>``, the token agreed by the ranks of one run, so a
half-written step of an earlier run is never mixed into this one), flushes and fsyncs
them, and leaves a record of them (name, size, CRC-32) beside them, itself written to a
temporary name and renamed. The publishing rank waits for every rank's record (no
collective: a rank whose part is small goes back to training at once), writes
``manifest.json`` last, fsyncs, and renames the partial directory to ``step-00000012``:
a step directory exists only with its manifest. The previous steps stay until then;
older ones beyond ``keep`` are removed after it::

    writer = StepWriter(root, step=12, rank=r, size=n, token=t)
    writer.write_arrays("model.npz", {"dense/kernel": w})       # any rank, any files
    writer.finish()                                             # every rank
    if r == 0:
        publish(root, 12, n, t, meta={"epoch": 3}, keep=2)      # waits for every record

A failure to write (a full disk, no permission) raises CheckpointSaveError naming the
path; the partial directory is left for the next publish to remove, and the previous
step stays.
"""

import io
import json
import os
import shutil
import threading
import time
import uuid
import zipfile
import zlib

import numpy as np

from tf_hvd.checkpoint.steps import (MANIFEST, complete_steps, partial_dirs, partial_name,
                                     step_name)
from tf_hvd.exceptions import CheckpointSaveError

_CHUNK = 16 << 20
FORMAT = 1


def new_token():
    """A token for one run's partial directories (drawn by one rank, shared by all)."""
    return uuid.uuid4().hex[:12]


def fsync_path(path):
    """Sync a file's data, or a directory's entries (after a rename in it), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_crc32(path):
    """CRC-32 and size of the file at ``path``, read in 16 MiB chunks."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            if not chunk:
                return crc & 0xFFFFFFFF, size
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)


class _CrcFile(object):
    """An open file seen write-only, keeping the CRC-32 and the size of what goes through
    it. It cannot seek, so zipfile writes each member's header once, before the member's
    data (sizes and CRC in a data descriptor after it): the bytes reach the file in order
    and their CRC-32 is the file's, with no second reading of the file."""

    def __init__(self, f, crc=True):
        self._f = f
        self._crc = crc
        self.crc = 0
        self.size = 0

    def read(self, *args):  # np.savez takes what has read() for an open file
        raise io.UnsupportedOperation("written only")

    def write(self, data):
        if self._crc:
            self.crc = zlib.crc32(data, self.crc)
        self.size += memoryview(data).nbytes
        return self._f.write(data)

    def tell(self):
        return self.size

    def flush(self):
        self._f.flush()


def write_npy(out, array):
    """``array`` in .npy format to ``out``: the header, then a plain array's own buffer
    in one write (np.save to a file-like object copies it chunk by chunk)."""
    array = np.asarray(array)
    if array.dtype.hasobject or array.dtype.fields or not array.flags.c_contiguous:
        np.lib.format.write_array(out, array)
        return
    np.lib.format.write_array_header_1_0(out, np.lib.format.header_data_from_array_1_0(array))
    out.write(array.reshape(-1).view(np.uint8))


def write_json_atomically(path, value):
    """``value`` as JSON at ``path``: a synced temporary renamed onto it."""
    tmp = "%s.tmp-%s" % (path, uuid.uuid4().hex[:8])
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class StepWriter(object):
    """One rank's part of one step: files written into the partial directory, then
    ``finish()`` syncs them and leaves their record for the publishing rank."""

    def __init__(self, root, step, rank, size, token):
        self.root = str(root)
        self.step = int(step)
        self.rank = int(rank)
        self.size = int(size)
        self.directory = os.path.join(self.root, partial_name(self.step, token))
        self.files = {}
        self._opened = []
        try:
            os.makedirs(self.directory, exist_ok=True)
        except OSError as e:
            raise self._failed(self.directory, e)

    def _failed(self, path, error):
        return CheckpointSaveError(
            "saving checkpoint step %d: rank %d cannot write %s (%s); the step is not "
            "published and the previous complete step stays"
            % (self.step, self.rank, path, error.strerror or error))

    def path(self, name):
        """Where file ``name`` (relative, '/'-separated) of this rank goes; its folders
        are made. Write it, then ``add(name)``."""
        full = os.path.join(self.directory, *name.split("/"))
        try:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        except OSError as e:
            raise self._failed(full, e)
        return full

    def add(self, name):
        """Count file ``name`` (already written at ``path(name)``) in this rank's part
        (``finish`` reads it back for its CRC-32)."""
        self.files[name] = None

    def write_arrays(self, name, arrays):
        """``arrays`` ({key: numpy array}) as one uncompressed .npz file ``name``. Its
        record holds each member's CRC-32 as zip takes it while writing (one pass over
        the bytes; a whole-file CRC-32 would be a second) and the file's size."""
        full = self.path(name)
        members = {}
        try:
            with open(full, "wb") as f:
                out = _CrcFile(f, crc=False)
                # np.savez's own format, its members written from the arrays' buffers
                with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
                    for key, value in arrays.items():
                        with z.open(key + ".npy", "w", force_zip64=True) as member:
                            write_npy(member, value)
                    for info in z.infolist():
                        members[info.filename] = info.CRC
        except OSError as e:
            raise self._failed(full, e)
        self.files[name] = {"size": out.size, "members": members}

    def write_array(self, name, array):
        """One array as a .npy file ``name``, its CRC-32 taken as it is written."""
        full = self.path(name)
        try:
            with open(full, "wb") as f:
                out = _CrcFile(f)
                np.save(out, np.asarray(array))
        except OSError as e:
            raise self._failed(full, e)
        self.files[name] = (out.crc & 0xFFFFFFFF, out.size)

    def finish(self, meta=None, publishing=False):
        """Sync this rank's files and leave their record (sizes and CRC-32s, and
        ``meta``) for the publishing rank. Returns the record. The publishing rank
        (``publishing=True``) hands its record to ``publish`` instead, whose sync of
        the directory after the manifest covers its files' entries too."""
        record = {"rank": self.rank, "files": {}, "meta": meta or {}}
        for name in sorted(self.files):
            full = os.path.join(self.directory, *name.split("/"))
            try:
                fsync_path(full)
                entry = self.files[name]
                if entry is None:  # added by path: read back
                    crc, size = file_crc32(full)
                    entry = {"size": size, "crc32": crc}
                elif isinstance(entry, tuple):  # written by write_array
                    entry = {"size": entry[1], "crc32": entry[0]}
            except OSError as e:
                raise self._failed(full, e)
            record["files"][name] = entry
        try:
            folders = set(os.path.dirname(os.path.join(self.directory, *n.split("/")))
                          for n in self.files)
            if publishing:
                folders.discard(self.directory)
            else:
                folders.add(self.directory)
            for d in sorted(folders):
                fsync_path(d)
            if not publishing:
                write_json_atomically(self.record_path(self.rank), record)
        except OSError as e:
            raise self._failed(self.directory, e)
        return record

    def fail(self, error):
        """Tell the publishing rank that this rank's part failed (best effort)."""
        try:
            write_json_atomically(self.record_path(self.rank),
                                   {"rank": self.rank, "failed": str(error)})
        except OSError:
            pass

    def record_path(self, rank):
        return os.path.join(self.directory, "rank%d.files.json" % rank)


def publish(root, step, size, token, meta=None, keep=2, timeout=600.0, poll=0.002,
            own=None):
    """On one rank: wait for the records of all ``size`` ranks of the partial step
    (``own``: this rank's, as its ``finish(publishing=True)`` returned it), write the
    manifest last, rename the step into place, then remove older steps (beyond
    ``keep``) and other runs' partial directories. Returns the step's path.

    Raises CheckpointSaveError naming the rank whose part failed or did not come
    within ``timeout`` seconds, or the path that could not be written."""
    root = str(root)
    partial = os.path.join(root, partial_name(step, token))
    records = {} if own is None else {int(own["rank"]): own}
    deadline = time.monotonic() + timeout
    while len(records) < size:
        for r in range(size):
            if r in records:
                continue
            path = os.path.join(partial, "rank%d.files.json" % r)
            if os.path.exists(path):
                with open(path) as f:
                    records[r] = json.load(f)
                if "failed" in records[r]:
                    raise CheckpointSaveError(
                        "checkpoint step %d is not published: rank %d could not write its "
                        "part: %s" % (step, r, records[r]["failed"]))
        if len(records) < size:
            if time.monotonic() > deadline:
                missing = [r for r in range(size) if r not in records]
                raise CheckpointSaveError(
                    "checkpoint step %d is not published: rank(s) %s did not finish their "
                    "part within %.0f s (%s)" % (step, ", ".join(map(str, missing)),
                                                 timeout, partial))
            time.sleep(poll)
            poll = min(poll * 2, 0.05)
    files = {}
    for r in range(size):
        for name, info in records[r]["files"].items():
            files[name] = dict(info, rank=r)
    manifest = {"format": FORMAT, "step": int(step), "size": int(size), "files": files,
                "meta": dict(meta or {}), "ranks_meta": {str(r): records[r]["meta"]
                                                           for r in range(size)}}
    final = os.path.join(root, step_name(step))
    try:
        write_json_atomically(os.path.join(partial, MANIFEST), manifest)
        fsync_path(partial)
        if os.path.exists(final):  # the same step saved again by a later run
            shutil.rmtree(final)
        os.rename(partial, final)
        fsync_path(root)
    except OSError as e:
        raise CheckpointSaveError(
            "checkpoint step %d is not published: cannot write %s (%s); the previous "
            "complete step stays" % (step, e.filename or partial, e.strerror or e))
    prune(root, keep, token)
    return final


def prune(root, keep, token=None):
    """Remove complete steps older than the newest ``keep`` and the partial directories
    of other runs (``token``'s own, of steps not yet published, stay). Each is renamed
    out of the steps' names at once (no loader sees it again) and deleted by a
    background thread, off the training's path; a job stopped before that thread ends
    leaves ``*.removing-*`` directories that the next prune deletes."""
    steps = complete_steps(root)
    doomed = []
    if keep is not None and keep > 0:
        doomed += [step_name(step) for step in steps[:-keep]]
    newest = steps[-1] if steps else -1
    doomed += [name for step, name, its_token in partial_dirs(root)
               if its_token != token or step <= newest]
    gone = [name for name in os.listdir(root) if ".removing-" in name]
    for name in doomed:
        away = "%s.removing-%s" % (name, uuid.uuid4().hex[:8])
        try:
            os.rename(os.path.join(root, name), os.path.join(root, away))
            gone.append(away)
        except OSError:
            pass
    if gone:
        thread = threading.Thread(target=_remove_all, args=(root, gone), daemon=True,
                                  name="tf_hvd-checkpoint-prune")
        thread.start()
        _pruning[:] = [t for t in _pruning if t.is_alive()] + [thread]
    return gone


_pruning = []


def _remove_all(root, names):
    for name in names:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def wait_pruned(timeout=None):
    """Wait for the background removals of old steps (tests, and a job's last save)."""
    while _pruning:
        _pruning.pop().join(timeout)
