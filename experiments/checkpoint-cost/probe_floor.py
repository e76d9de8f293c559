"""How close the protocol gets to np.save+fsync with the proposed changes, by hand, one
process, TensorFlow-free.

    ~/.venvs/tf_hvd/bin/python experiments/checkpoint-cost/probe_floor.py [--rounds 7]

probe_write.py's ~100 MB arrays saved by one rank of one (size 1), in rounds whose order
flips, each variant timed from the first byte to the return:

  protocol           StepWriter.write_arrays + finish + publish(keep=2), as committed
                     (9fbabdd: the CRC-32 taken while np.savez writes)
  + npz direct       write_arrays as proposal-npz-direct.diff: each member's .npy header,
                     then the array's own buffer in one write (no np.savez copies)
  + prune later      the same, publish(keep=None) timed, the old steps pruned after the
                     clock stops (prune off the save's path, e.g. at the next save)
  + crc beside fsync the same, the file's CRC-32 taken by a thread from the bytes as they
                     are written (zlib.crc32 lets go of the GIL), the data fsynced in
                     write_arrays while that thread finishes (an idea, not a diff)
  np.save+fsync      the arrays np.save()d into one fresh file, fsync, the file of two
                     saves before removed (as checkpoint_bench.py's baseline)
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import queue
import threading
import time
import zipfile
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tf_hvd.checkpoint import StepWriter, commit, prune, publish  # noqa: E402

from probe_write import arrays, _save  # noqa: E402


def _write_npy(out, array):
    array = np.asarray(array)
    if array.dtype.hasobject or array.dtype.fields or not array.flags.c_contiguous:
        np.lib.format.write_array(out, array)
        return
    np.lib.format.write_array_header_1_0(out, np.lib.format.header_data_from_array_1_0(array))
    out.write(array.reshape(-1).view(np.uint8))


class DirectWriter(StepWriter):
    """StepWriter with proposal-npz-direct.diff's write_arrays."""

    def write_arrays(self, name, arrays):
        full = self.path(name)
        with open(full, "wb") as f:
            out = commit._CrcFile(f)
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
                for key, value in arrays.items():
                    with z.open(key + ".npy", "w", force_zip64=True) as member:
                        _write_npy(member, value)
        self.files[name] = (out.crc & 0xFFFFFFFF, out.size)


class ThreadCrcFile(commit._CrcFile):
    """_CrcFile whose CRC-32 a thread of its own takes from a queue of the writes."""

    def __init__(self, f):
        commit._CrcFile.__init__(self, f)
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            data = self._queue.get()
            if data is None:
                return
            self.crc = zlib.crc32(data, self.crc)

    def write(self, data):
        self.size += memoryview(data).nbytes
        self._queue.put(data)  # the arrays do not change while a step is saved
        return self._f.write(data)

    def result(self):
        self._queue.put(None)
        self._thread.join()
        return self.crc & 0xFFFFFFFF


class OverlapWriter(StepWriter):
    """DirectWriter's file, its CRC-32 taken beside the write and the fsync."""

    def write_arrays(self, name, arrays):
        full = self.path(name)
        with open(full, "wb") as f:
            out = ThreadCrcFile(f)
            with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
                for key, value in arrays.items():
                    with z.open(key + ".npy", "w", force_zip64=True) as member:
                        _write_npy(member, value)
            f.flush()
            os.fsync(f.fileno())  # while the thread finishes the CRC
        self.files[name] = (out.result(), out.size)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    data = arrays()
    base = tempfile.mkdtemp(prefix="floor-probe-", dir=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    step = [0]
    kept = []

    def protocol(cls, later, root):
        def run():
            step[0] += 1
            w = cls(root, step[0], 0, 1, "probe")
            w.write_arrays("model.npz", data)
            w.finish()
            publish(root, step[0], 1, "probe", keep=None if later else 2)
        return run

    def baseline():
        step[0] += 1
        path = os.path.join(base, "np%06d.npy" % step[0])
        kept.append(path)
        if len(kept) > 2:
            os.remove(kept.pop(0))
        _save(path, data, True)

    roots = dict((n, os.path.join(base, n)) for n in ("a", "b", "c", "d"))
    items = [("protocol", protocol(StepWriter, False, roots["a"])),
             ("+ npz direct", protocol(DirectWriter, False, roots["b"])),
             ("+ prune later", protocol(DirectWriter, True, roots["c"])),
             ("+ crc beside fsync", protocol(OverlapWriter, True, roots["d"])),
             ("np.save+fsync", baseline)]
    times = dict((n, []) for n, _ in items)
    check = OverlapWriter(os.path.join(base, "check"), 1, 0, 1, "check")
    check.write_arrays("model.npz", data)
    assert check.files["model.npz"][0] == commit.file_crc32(check.path("model.npz"))[0]
    try:
        for r in range(args.rounds + 2):  # two warm-up rounds fill keep=2
            for name, fn in (items if r % 2 == 0 else items[::-1]):
                t0 = time.perf_counter()
                fn()
                if r >= 2:
                    times[name].append(time.perf_counter() - t0)
                prune(roots["c"], 2, "probe")
                prune(roots["d"], 2, "probe")
        print("%d rounds, load %s" % (args.rounds, os.getloadavg()))
        ref = statistics.median(times["np.save+fsync"])
        for name, _ in items:
            t = [x * 1e3 for x in times[name]]
            print("%-16s %7.1f ms [%.1f-%.1f]  %.2f x np.save+fsync (medians)" % (
                name, statistics.median(t), min(t), max(t), statistics.median(t) / 1e3 / ref))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
