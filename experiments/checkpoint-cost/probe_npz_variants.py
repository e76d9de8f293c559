"""Ways to write model.npz and its CRC-32, by hand, TensorFlow-free, one process.

    ~/.venvs/tf_hvd/bin/python experiments/checkpoint-cost/probe_npz_variants.py [--rounds 5]

The same ~100 MB of arrays as probe_write.py (an MLP's weights and Adam's two slots), each
variant ending with the file fsynced and its whole-file CRC-32 known, in rounds whose order
flips:

  savez+reread        what StepWriter does today: np.savez, fsync, then file_crc32 reads
                      the file back
  savez+stream crc    np.savez into a wrapper that CRCs every byte as it is written and
                      tells zipfile it cannot seek (zipfile then streams: no header is
                      rewritten, so the CRC of the writes is the file's), fsync; no re-read
  zip direct+stream   the same wrapper, each member written by hand: the .npy header
                      (numpy.lib.format), then the array's own buffer in one write (no
                      nditer buffer, no tobytes copy; zipfile still CRCs the member)
  np.save+fsync       the baseline: the arrays np.save()d one after the other, fsync

Every variant's file is checked: np.load gives back the arrays, and the CRC it reports
equals file_crc32 of the file.
"""

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tf_hvd.checkpoint.commit import file_crc32  # noqa: E402

from probe_write import arrays, _save  # noqa: E402


class CrcWriter(object):
    """A write-only, unseekable file: CRC-32 and count of everything written."""

    def __init__(self, f):
        self.f, self.crc, self.size = f, 0, 0

    def write(self, data):
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(memoryview(data).cast("B")) if not isinstance(data, bytes) \
            else len(data)
        return self.f.write(data)

    def tell(self):
        return self.size

    def seekable(self):
        return False

    def read(self, *args):  # np.savez takes an object with read() for a file object
        raise io.UnsupportedOperation("write-only")

    def flush(self):
        self.f.flush()


def savez_reread(path, data):
    with open(path, "wb") as f:
        np.savez(f, **data)
        f.flush()
        os.fsync(f.fileno())
    return file_crc32(path)[0]


def savez_stream(path, data):
    with open(path, "wb") as f:
        w = CrcWriter(f)
        np.savez(w, **data)
        f.flush()
        os.fsync(f.fileno())
    return w.crc & 0xFFFFFFFF


def zip_direct(path, data):
    with open(path, "wb") as f:
        w = CrcWriter(f)
        with zipfile.ZipFile(w, mode="w", compression=zipfile.ZIP_STORED,
                             allowZip64=True) as z:
            for key, a in data.items():
                a = np.ascontiguousarray(a)
                with z.open(key + ".npy", "w", force_zip64=True) as m:
                    np.lib.format.write_array_header_1_0(
                        m, np.lib.format.header_data_from_array_1_0(a))
                    m.write(memoryview(a).cast("B"))
        f.flush()
        os.fsync(f.fileno())
    return w.crc & 0xFFFFFFFF


def save_fsync(path, data):
    _save(path, data, True)
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    data = arrays()
    root = tempfile.mkdtemp(prefix="npz-probe-", dir=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    items = [("savez+reread", savez_reread), ("savez+stream crc", savez_stream),
             ("zip direct+stream", zip_direct), ("np.save+fsync", save_fsync)]
    times = dict((n, []) for n, _ in items)
    kept = []
    try:
        for name, fn in items:  # check every variant once
            path = os.path.join(root, "check.npz")
            crc = fn(path, data)
            if crc is not None:
                assert crc == file_crc32(path)[0], name
                with np.load(path) as z:
                    for k, a in data.items():
                        np.testing.assert_array_equal(z[k], a)
            os.remove(path)
        n = 0
        for r in range(args.rounds):
            for name, fn in (items if r % 2 == 0 else items[::-1]):
                n += 1
                path = os.path.join(root, "f%04d" % n)
                kept.append(path)
                if len(kept) > 2:
                    os.remove(kept.pop(0))
                t0 = time.perf_counter()
                fn(path, data)
                times[name].append(time.perf_counter() - t0)
        print("%.1f MB, %d rounds, load %s; checked: np.load equal, CRC == file_crc32"
              % (sum(a.nbytes for a in data.values()) / 1e6, args.rounds, os.getloadavg()))
        for name, _ in items:
            t = [x * 1e3 for x in times[name]]
            print("%-18s %7.1f ms [%.1f-%.1f]" % (name, statistics.median(t), min(t), max(t)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
