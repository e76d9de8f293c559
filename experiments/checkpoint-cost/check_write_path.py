"""By-hand check of StepWriter's streamed write path (commit.py's write_arrays/write_array
with the CRC-32 taken while writing): np.load gives every array back, equal in value, dtype
and shape, and the CRC-32 and size in the record equal file_crc32 of the file as it lies on
disk, for the dtypes and shapes a checkpoint holds (0-d int64 counters, float16, bool,
complex, empty, Fortran-ordered and strided views, a structured and an object array).

    ~/.venvs/tf_hvd/bin/python experiments/checkpoint-cost/check_write_path.py
"""

import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tf_hvd.checkpoint import StepWriter  # noqa: E402
from tf_hvd.checkpoint.commit import file_crc32  # noqa: E402


def main():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((300, 200)).astype(np.float32)
    arrays = {"model/00000": big, "iterations/t/x": np.asarray(7, dtype=np.int64),
              "f16": big[:10].astype(np.float16), "b": big > 0,
              "c": (big[:5] + 1j).astype(np.complex64), "empty": np.zeros((0, 3)),
              "fortran": np.asfortranarray(big[:20]), "strided": big[::3, ::2],
              "be": big[:4].astype(">f4"),
              "structured": np.zeros(3, dtype=[("a", "i4"), ("b", "f8")])}
    with tempfile.TemporaryDirectory() as root:
        w = StepWriter(root, 1, 0, 1, "check")
        w.write_arrays("model.npz", arrays)
        w.write_array("rows/t.npy", big[::2])
        w.write_array("obj.npy", np.array([{"a": 1}, None], dtype=object))
        record = w.finish()
        for name, info in record["files"].items():
            crc, size = file_crc32(os.path.join(w.directory, *name.split("/")))
            assert (info["crc32"], info["size"]) == (crc, size), (name, info, crc, size)
        with np.load(os.path.join(w.directory, "model.npz")) as z:
            assert sorted(z.files) == sorted(arrays)
            for k, a in arrays.items():
                assert z[k].dtype == a.dtype and z[k].shape == a.shape, k
                np.testing.assert_array_equal(z[k], a)
        np.testing.assert_array_equal(np.load(os.path.join(w.directory, "rows", "t.npy")),
                                      big[::2])
        assert np.load(os.path.join(w.directory, "obj.npy"), allow_pickle=True)[0] == {"a": 1}
    print("ok: %d arrays and 2 .npy files read back equal; records' CRC-32 and sizes equal "
          "the files'" % len(arrays))


if __name__ == "__main__":
    main()
