"""Where a Spark estimator keeps its data and checkpoints: a local or shared file-system
path, or an fsspec URL (``hdfs://``, ``s3://``, ``gs://``, ... with the matching fsspec
package installed), as Horovod's ``horovod.spark.common.store``.

Layout under the prefix::

    intermediate_train_data.<run_id>/   the training DataFrame as Parquet (Spark writes it)
    intermediate_val_data.<run_id>/     the validation rows, when there are any
    runs/<run_id>/checkpoint.keras      rank 0's model after each epoch (and the last)
    runs/<run_id>/checkpoint.keras.manifest.json   its size and CRC-32, written last

A checkpoint is committed whole (a temporary name moved onto the path, the sidecar
written last, see ``write_bytes``): a reader sees the previous model or the new one,
and ``read_bytes`` checks the file against its sidecar.

Spark's Parquet writer and the ranks' pyarrow readers must both reach the prefix: a local
path must be on a file system every executor shares (NFS, a cluster file system), as
Horovod's LocalStore requires; a URL must be one Spark's Hadoop connectors read too
(``spark_prefix_path`` gives Spark's spelling when it differs, e.g. ``s3a://`` for
fsspec's ``s3://``).

    >>> store = Store.create("/tmp/tf_hvd_store")
    >>> store.get_checkpoint_path("run1")
    '/tmp/tf_hvd_store/runs/run1/checkpoint.keras'
"""

import json
import os
import posixpath
import uuid

import fsspec

from tf_hvd.checkpoint import atomic
from tf_hvd.exceptions import CheckpointError, CheckpointSaveError


class Store(object):
    """A prefix path and the file system it is on."""

    def __init__(self, prefix_path, spark_prefix_path=None, storage_options=None):
        self.prefix_path = str(prefix_path).rstrip("/") or "/"
        self.is_url = "://" in self.prefix_path
        if not self.is_url:
            self.prefix_path = os.path.abspath(self.prefix_path)
        self.spark_prefix_path = (spark_prefix_path.rstrip("/") if spark_prefix_path else
                                  self.prefix_path if self.is_url else
                                  "file://" + self.prefix_path)
        self.storage_options = dict(storage_options or {})
        self.fs, self.fs_prefix = fsspec.core.url_to_fs(self.prefix_path,
                                                        **self.storage_options)

    @staticmethod
    def create(prefix_path, *args, **kwargs):
        """A Store for ``prefix_path`` (Horovod's ``Store.create``)."""
        return Store(prefix_path, *args, **kwargs)

    # -- paths -------------------------------------------------------------------------------
    def _join(self, *parts):
        return posixpath.join(self.prefix_path, *parts)

    def get_train_data_path(self, run_id):
        return self._join("intermediate_train_data.%s" % run_id)

    def get_val_data_path(self, run_id):
        return self._join("intermediate_val_data.%s" % run_id)

    def get_run_path(self, run_id):
        return self._join("runs", run_id)

    def get_checkpoint_path(self, run_id):
        return self._join("runs", run_id, "checkpoint.keras")

    def spark_path(self, path):
        """``path`` (under the prefix) as Spark's writer names it."""
        return self.spark_prefix_path + path[len(self.prefix_path):]

    # -- files -------------------------------------------------------------------------------
    def check_writable(self):
        """Raise ValueError naming the prefix when a file cannot be made there."""
        probe = self._join(".tf_hvd_write_probe.%s" % uuid.uuid4().hex[:8])
        try:
            self.fs.makedirs(self.prefix_path, exist_ok=True)
            with self.fs.open(probe, "wb") as f:
                f.write(b"ok")
            self.fs.rm(probe)
        except Exception as e:  # noqa: BLE001 - any file system's error
            raise ValueError("the store's path %s cannot be written (%s: %s); give a "
                             "Store on a path every Spark executor can write"
                             % (self.prefix_path, type(e).__name__, e))

    def exists(self, path):
        return self.fs.exists(path)

    def write_bytes(self, path, data):
        """``data`` as the file ``path``, committed so that a reader never sees a partial
        file: written under a temporary name (synced, on a local path), moved onto
        ``path``, then a sidecar ``<path>.manifest.json`` with its size and CRC-32
        written last (tf_hvd.checkpoint.atomic's order, which ``read_bytes`` checks).
        A failed write raises CheckpointSaveError naming the path; the previous file
        stays."""
        if not self.is_url:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
            except OSError as e:
                raise atomic.save_error(path, e)
            atomic.write_verified(path, data)
            return
        tmp = atomic.temporary_name(path)
        try:
            self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
            atomic.commit_steps(lambda: (self._read_sidecar(path) or {}).get("accept", []),
                                lambda accept: self._write_sidecar(path, accept),
                                lambda: self._put(tmp, data),
                                lambda: self.fs.mv(tmp, path), data)
        except OSError as e:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)
            if isinstance(e, CheckpointSaveError):
                raise
            raise atomic.save_error(path, e)

    def _put(self, path, data):
        with self.fs.open(path, "wb") as f:
            f.write(data)

    def _write_sidecar(self, path, accept):
        # under a temporary name first: on a file system (not an object store) a write
        # in place could be seen half done
        side = path + atomic.SIDECAR
        tmp = atomic.temporary_name(side)
        self._put(tmp, json.dumps({"format": 1, "accept": list(accept)}).encode())
        self.fs.mv(tmp, side)

    def _read_sidecar(self, path):
        try:
            with self.fs.open(path + atomic.SIDECAR, "rb") as f:
                return json.loads(f.read().decode())
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise CheckpointError("cannot read %s%s (%s)" % (path, atomic.SIDECAR, e))

    def read_bytes(self, path, require_manifest=False):
        """The bytes of the file ``path``, checked against the size and CRC-32 of its
        sidecar (CheckpointError names the file when they differ). A file without a
        sidecar (written before tf_hvd committed checkpoints) is returned as it is,
        unless ``require_manifest``::

            data = store.read_bytes(store.get_checkpoint_path(run_id), True)
        """
        def read_data():
            with self.fs.open(path, "rb") as f:
                return f.read()
        return atomic.read_checked(path, read_data, lambda: self._read_sidecar(path),
                                   require_manifest)

    def parquet_files(self, path):
        """The Parquet files Spark wrote under ``path``, sorted."""
        return sorted(p for p in self.fs.find(path) if p.endswith(".parquet"))

    def remove(self, path):
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)


class LocalStore(Store):
    """A Store on a file-system path (Horovod's ``LocalStore``): on a cluster, a path
    every executor shares."""

    def __init__(self, prefix_path, *args, **kwargs):
        if "://" in str(prefix_path) and not str(prefix_path).startswith("file://"):
            raise ValueError("LocalStore takes a file-system path, not %r; use Store.create "
                             "for fsspec URLs" % (prefix_path,))
        Store.__init__(self, str(prefix_path).replace("file://", "", 1), *args, **kwargs)
