"""The launcher's cache of start-up check results (horovodrun's ``~/.horovod`` cache).

A check that succeeded (which MPI mpiexec is, whether a host answers over ssh, ...) is
remembered for 60 minutes, so that starting many jobs in a row does not repeat it;
``--disable-cache`` makes every check run again. Only successful results are stored
(a failed check runs again next time). The file is JSON, one per user, written
atomically; a corrupt or unreadable file counts as empty.

    cache = LauncherCache.for_args(args)          # disabled with --disable-cache
    flavor = cache.get_or_compute(("mpi_flavor", path, mtime), lambda: detect(path))
"""

import json
import os
import tempfile
import time

from ...job import rank_env

STALE_AFTER_S = 60 * 60


def default_path():
    root = os.environ.get(rank_env.CACHE_DIR) or os.path.join(os.path.expanduser("~"), ".tf_hvd")
    return os.path.join(root, "launcher_cache.json")


class LauncherCache(object):
    def __init__(self, path=None, enabled=True, stale_after_s=STALE_AFTER_S, clock=time.time):
        self.path = path or default_path()
        self.enabled = enabled
        self.stale_after_s = stale_after_s
        self.clock = clock
        self.hits = 0
        self.misses = 0

    @classmethod
    def for_args(cls, args):
        return cls(enabled=not args.disable_cache)

    @staticmethod
    def _key(key):
        return json.dumps(key, sort_keys=True)

    def _read(self):
        try:
            with open(self.path) as f:
                data = json.load(f)
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _write(self, data):
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".launcher_cache.")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written only costs time

    def get(self, key):
        """(True, value) for a fresh entry, else (False, None)."""
        if not self.enabled:
            return False, None
        entry = self._read().get(self._key(key))
        if (isinstance(entry, dict) and "time" in entry and
                self.clock() - entry["time"] < self.stale_after_s):
            return True, entry.get("value")
        return False, None

    def put(self, key, value):
        if not self.enabled:
            return
        data = self._read()
        now = self.clock()
        data = {k: v for k, v in data.items()
                if isinstance(v, dict) and now - v.get("time", 0) < self.stale_after_s}
        data[self._key(key)] = {"time": now, "value": value}
        self._write(data)

    def get_or_compute(self, key, compute, ok=lambda value: value is not None):
        """The cached value of ``key``, or ``compute()`` (stored when ``ok(value)``)."""
        found, value = self.get(key)
        if found:
            self.hits += 1
            return value
        self.misses += 1
        value = compute()
        if ok(value):
            self.put(key, value)
        return value
