"""Where hvd.Checkpointer.save's time goes on the saving rank, by hand, one process.

    ~/.venvs/tf_hvd/bin/python experiments/checkpoint-cost/probe_save_parts.py [--rounds 5]

checkpoint_bench.py's model (MLP 1024-2048-2048-1024, Adam: 100.7 MB of state), one
process (no launcher: rank 0 of 1). Each round runs Checkpointer.save's steps one by one,
as tf_hvd/_keras/checkpointer.py does, timing each:

  gather        training_state.gather: every variable to numpy (the optimizer's on every
                rank, the model's on the saving rank)
  gather, not root  the same call as a rank other than the root makes it (it returns
                None, after converting the optimizer's variables all the same)
  savez         StepWriter.write_arrays: np.savez of the arrays (uncompressed zip)
  finish        StepWriter.finish: fsync, then the CRC-32 re-read (file_crc32, timed
                apart: "of it: crc re-read"), directory fsyncs, the record
  publish       commit.publish with size 1: the manifest (fsync), rename, root fsync, prune
  whole save    Checkpointer.save itself, for the sum
and, for scale, np.save+fsync of the same arrays into one file.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    import keras
    import tf_hvd
    from tf_hvd._keras import training_state
    from tf_hvd.checkpoint import StepWriter, commit, publish
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((1024,))] + [keras.layers.Dense(n) for n in
                                                       (2048, 2048, 1024)])
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="mse")
    x = np.ones((32, 1024), np.float32)
    model.train_on_batch(x, x)
    opt = model.optimizer
    root = tempfile.mkdtemp(prefix="save-parts-", dir=ROOT)
    crc_time = []
    real_crc = commit.file_crc32

    def timed_crc(path):
        t0 = time.perf_counter()
        try:
            return real_crc(path)
        finally:
            crc_time.append(time.perf_counter() - t0)

    commit.file_crc32 = timed_crc
    times = {}

    def note(name, t0):
        times.setdefault(name, []).append(time.perf_counter() - t0)

    ckpt = tf_hvd.Checkpointer(os.path.join(root, "whole"), model, opt, keep=2)
    ckpt.restore()
    kept = []
    try:
        for r in range(args.rounds + 1):  # the first one warms up
            step = r + 1
            t0 = time.perf_counter()
            arrays, meta = training_state.gather(model, opt, 0, 0)
            note("gather", t0)
            t0 = time.perf_counter()
            training_state.gather(model, opt, 1, 0)  # what a rank that writes nothing does
            note("gather, not root", t0)
            t0 = time.perf_counter()
            w = StepWriter(os.path.join(root, "parts"), step, 0, 1, "probe")
            w.write_arrays("model.npz", arrays)
            note("savez", t0)
            t0 = time.perf_counter()
            w.finish()
            note("finish", t0)
            # 0 once StepWriter takes the CRC while writing (commit 9fbabdd)
            times.setdefault("of it: crc re-read", []).append(crc_time.pop() if crc_time
                                                              else 0.0)
            t0 = time.perf_counter()
            publish(os.path.join(root, "parts"), step, 1, "probe", meta=meta, keep=2)
            note("publish", t0)
            t0 = time.perf_counter()
            ckpt.save(step)
            note("whole save", t0)
            t0 = time.perf_counter()
            path = os.path.join(root, "np%d.npy" % step)
            with open(path, "wb") as f:
                for v in list(model.variables) + list(opt.variables):
                    np.save(f, v.numpy())
                f.flush()
                os.fsync(f.fileno())
            note("np.save+fsync", t0)
            kept.append(path)
            if len(kept) > 2:
                os.remove(kept.pop(0))
            if r == 0:
                times.clear()
        print("%d rounds, load %s" % (args.rounds, os.getloadavg()))
        for name, t in times.items():
            t = [x * 1e3 for x in t]
            print("%-20s %7.1f ms [%.1f-%.1f]" % (name, statistics.median(t), min(t), max(t)))
    finally:
        commit.file_crc32 = real_crc
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
