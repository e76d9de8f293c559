"""Where a 100 MB checkpoint write's time goes, by hand, TensorFlow-free, one process.

    ~/.venvs/tf_hvd/bin/python experiments/checkpoint-cost/probe_write.py [--mb 100] [--rounds 5]
        [--dir DIR]

The arrays are those of checkpoint_bench.py's MLP with Adam (weights, m, v: float32
1024x2048, 2048x2048, 2048x1024 and biases, three times; ~100 MB). Every round times, in
an order that flips from round to round, each of:

  np.save            the arrays np.save()d one after the other into one new file
  np.save+fsync      the same, then fsync
  np.savez           np.savez (uncompressed zip, what StepWriter.write_arrays writes)
  np.savez+fsync     the same, then fsync
  crc reread         file_crc32 of the file just written (StepWriter.finish's re-read)
  crc in memory      zlib.crc32 over the arrays' bytes (the CRC without the re-read)
  writer (np=1)      StepWriter.write_arrays + finish + publish(size=1), the protocol
                     on one rank (no second rank, no TensorFlow)

Each file goes to a fresh name in --dir (default: a temporary folder on the repository's
disk, not tmpfs), and the file of two saves before is removed, as keep=2 does.
Prints median [min-max] ms per item.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tf_hvd.checkpoint import StepWriter, publish  # noqa: E402
from tf_hvd.checkpoint.commit import file_crc32  # noqa: E402


def arrays():
    rng = np.random.default_rng(0)
    shapes = [(1024, 2048), (2048,), (2048, 2048), (2048,), (2048, 1024), (1024,)]
    out = {}
    for copy in ("model", "m", "v"):
        for i, s in enumerate(shapes):
            out["%s/%05d" % (copy, i)] = rng.standard_normal(s, dtype=np.float32)
    return out


def _save(path, data, fsync):
    with open(path, "wb") as f:
        for a in data.values():
            np.save(f, a)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def _savez(path, data, fsync):
    with open(path, "wb") as f:
        np.savez(f, **data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    data = arrays()
    nbytes = sum(a.nbytes for a in data.values())
    root = tempfile.mkdtemp(prefix="ckpt-probe-", dir=args.dir or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    counter = [0]
    written = []

    def fresh():
        counter[0] += 1
        path = os.path.join(root, "f%04d" % counter[0])
        written.append(path)
        if len(written) > 2:
            os.remove(written.pop(0))
        return path

    last = {}

    def crc_reread():
        file_crc32(last["path"])

    def crc_memory():
        crc = 0
        for a in data.values():
            crc = zlib.crc32(memoryview(a).cast("B"), crc)

    def writer():
        counter[0] += 1
        w = StepWriter(os.path.join(root, "ckpt"), counter[0], 0, 1, "probe")
        w.write_arrays("model.npz", data)
        w.finish()
        publish(os.path.join(root, "ckpt"), counter[0], 1, "probe", keep=2)

    def saving(fn, fsync):
        def run():
            last["path"] = fresh()
            fn(last["path"], data, fsync)
        return run

    items = [("np.save", saving(_save, False)), ("np.save+fsync", saving(_save, True)),
             ("np.savez", saving(_savez, False)), ("np.savez+fsync", saving(_savez, True)),
             ("crc reread", crc_reread), ("crc in memory", crc_memory),
             ("writer (np=1)", writer)]
    times = dict((name, []) for name, _ in items)
    try:
        saving(_save, True)()  # warm: the first write maps the file system's blocks
        for r in range(args.rounds):
            order = items if r % 2 == 0 else items[::-1]
            for name, fn in order:
                if name == "crc reread" and "path" not in last:
                    continue
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        print("%.1f MB in %d arrays, %d rounds, load %s" % (
            nbytes / 1e6, len(data), args.rounds, os.getloadavg()))
        for name, _ in items:
            t = [x * 1e3 for x in times[name]]
            print("%-16s %7.1f ms [%.1f-%.1f]  %.2f GB/s" % (
                name, statistics.median(t), min(t), max(t),
                nbytes / statistics.median(t) / 1e6))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
