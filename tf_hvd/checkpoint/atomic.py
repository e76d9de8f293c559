"""One file saved so that it is complete or absent: the commit protocol for a checkpoint
that is a single file at a fixed path (``hvd.save_model``'s Keras file, the Spark
estimator's ``checkpoint.keras``).

The file is written under a temporary name in its own directory (same extension: Keras
picks the format from it), flushed and fsynced, then ``os.replace``d onto the final
path and the directory fsynced: a reader sees the previous file or the new one, never a
partial one. A failure (a full disk, no permission) removes the temporary, keeps the
previous file and raises CheckpointSaveError naming the path::

    with replace_file("/ckpt/model.keras") as tmp:    # tmp: /ckpt/.model.tmp-1a2b.keras
        model.save(tmp)

A *sidecar* (``<file>.manifest.json``, written last) lists the size and CRC-32 a reader
accepts; ``sums_of`` / ``check_sums`` compute and check them (see tf_hvd.spark.store).
"""

import contextlib
import json
import os
import uuid
import zlib

from tf_hvd.checkpoint.commit import fsync_path, write_json_atomically
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError

SIDECAR = ".manifest.json"


def temporary_name(path):
    """A fresh name beside ``path`` with its extension (``.model.tmp-<hex>.keras``),
    hidden so that a listing of the directory does not offer it as a checkpoint."""
    directory, base = os.path.split(str(path))
    stem, ext = os.path.splitext(base)
    if ext == "" or stem == "":  # ".keras" alone: keep it whole as the extension
        stem, ext = base, ""
    return os.path.join(directory, ".%s.tmp-%s%s" % (stem, uuid.uuid4().hex[:8], ext))


def save_error(path, error):
    """The CheckpointSaveError for a failed save of ``path`` (an OSError's reason)."""
    return CheckpointSaveError("cannot save %s (%s); the previous file stays"
                               % (path, getattr(error, "strerror", None) or error))


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


@contextlib.contextmanager
def replace_file(path):
    """Yields a temporary path to write; on leaving the block without an error the file
    there is synced and renamed onto ``path``. On an OSError (inside the block or while
    committing) the temporary is removed and CheckpointSaveError names ``path``; other
    errors pass through after the temporary is removed."""
    path = str(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = temporary_name(path)
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
        fsync_path(directory)
    except OSError as e:
        _remove(tmp)
        raise save_error(path, e)
    except BaseException:
        _remove(tmp)
        raise


def write_file(path, data):
    """``data`` (bytes) as the file ``path``, complete or absent (see replace_file)."""
    with replace_file(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def sums_of(data):
    """The entry a sidecar keeps for ``data``: {"size": bytes, "crc32": CRC-32}."""
    return {"size": len(data), "crc32": zlib.crc32(data) & 0xFFFFFFFF}


def check_sums(path, data, sidecar):
    """Raise CheckpointError naming ``path`` unless ``data`` (the file's bytes) matches
    one entry of ``sidecar`` (a dict with "accept": [entries]); returns ``data``."""
    got = sums_of(data)
    accepted = sidecar.get("accept", [])
    if got in accepted:
        return data
    sizes = sorted(set(e["size"] for e in accepted))
    if got["size"] not in sizes:
        raise CheckpointError("checkpoint file %s has %d bytes, its manifest says %s "
                              "(truncated or overwritten)"
                              % (path, got["size"], " or ".join(map(str, sizes))))
    raise CheckpointError("checkpoint file %s is corrupted: its CRC-32 is %08x, its manifest "
                          "says %s" % (path, got["crc32"], " or ".join(
                              "%08x" % e["crc32"] for e in accepted if e["size"] == got["size"])))


def write_sidecar(path, accept):
    """The sidecar of local file ``path`` accepting the entries ``accept``, replaced
    atomically (a reader sees the old list or the new one)."""
    try:
        write_json_atomically(str(path) + SIDECAR, {"format": 1, "accept": list(accept)})
    except OSError as e:
        raise save_error(str(path) + SIDECAR, e)


def read_sidecar(path):
    """The sidecar of local file ``path`` as a dict, None when there is none."""
    try:
        with open(str(path) + SIDECAR) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise CheckpointError("cannot read %s%s (%s)" % (path, SIDECAR, e))


def commit_steps(sidecar_before, sidecar_after, write_tmp, rename, data):
    """The order of a commit with a sidecar, for any file system: the temporary written,
    the sidecar accepting the new file *and* the one still in place, the rename, then
    the sidecar accepting only the new file. At every moment the file in place matches
    its sidecar, so a reader never mistakes a commit under way for a corruption.

    ``sidecar_before()`` returns the entries the current sidecar accepts;
    ``sidecar_after(entries)`` writes the sidecar; ``write_tmp()`` writes ``data`` to
    the temporary and ``rename()`` moves it onto the final path."""
    new = sums_of(data)
    write_tmp()
    sidecar_after([new] + [e for e in sidecar_before() if e != new])
    rename()
    sidecar_after([new])


def write_verified(path, data):
    """``data`` as the local file ``path``, complete or absent, with a sidecar written
    last that ``read_verified`` checks::

        write_verified("/store/runs/r1/checkpoint.keras", model_bytes)
        data = read_verified("/store/runs/r1/checkpoint.keras", require=True)
    """
    path = str(path)
    tmp = temporary_name(path)

    def write_tmp():
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def rename():
        os.replace(tmp, path)
        fsync_path(os.path.dirname(os.path.abspath(path)))

    def before():
        try:
            return (read_sidecar(path) or {}).get("accept", [])
        except CheckpointError:  # an unreadable sidecar is replaced, not trusted
            return []

    try:
        commit_steps(before, lambda accept: write_sidecar(path, accept), write_tmp,
                     rename, data)
    except OSError as e:
        _remove(tmp)
        if isinstance(e, CheckpointSaveError):
            raise
        raise save_error(path, e)
    except BaseException:
        _remove(tmp)
        raise


def read_checked(path, read_data, read_side, require=False, attempts=3):
    """The bytes of checkpoint file ``path`` (``read_data()``), checked against its
    sidecar (``read_side()``: a dict, None when there is none). Without a sidecar the
    file predates the protocol: returned as it is, unless ``require``. A mismatch is
    read again (a commit may have moved the file between the two reads) before
    CheckpointError names the file."""
    for attempt in range(attempts):
        data = read_data()
        sidecar = read_side()
        if sidecar is None:
            if require:
                raise CheckpointError("checkpoint file %s has no manifest %s%s: it was not "
                                      "committed (or was written before tf_hvd committed "
                                      "checkpoints)" % (path, path, SIDECAR))
            return data
        try:
            return check_sums(path, data, sidecar)
        except CheckpointError:
            if attempt == attempts - 1:
                raise


def read_verified(path, require=False):
    """The local file ``path``'s bytes, checked against its sidecar (see read_checked)."""
    def read_data():
        with open(str(path), "rb") as f:   # a missing file: FileNotFoundError names it
            return f.read()
    return read_checked(path, read_data, lambda: read_sidecar(path), require)
