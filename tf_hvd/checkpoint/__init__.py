"""The commit protocol under everything tf_hvd saves for the user: a checkpoint step is
complete or absent. TensorFlow-free (file system only), so the launchers, Spark and the
Keras savers share it.

A checkpoint directory holds numbered steps; ``commit.StepWriter`` writes one rank's part
of a step into the step's partial directory and syncs it, ``commit.publish`` (one rank)
writes the manifest last and renames the step into place, ``steps.Step.newest`` finds the
newest complete step and ``Step.verify`` checks a file's size and CRC-32 before it is
read::

    from tf_hvd.checkpoint import StepWriter, publish, Step
    w = StepWriter("/ckpt", 3, rank=0, size=1, token="t0")
    w.write_arrays("model.npz", {"w": np.ones(3)}); w.finish()
    publish("/ckpt", 3, 1, "t0")
    Step.newest("/ckpt").verify("model.npz")

A checkpoint that is one file at a fixed path (``hvd.save_model``, the Spark store) is
committed by ``atomic``: written under a temporary name, synced and renamed onto the path
(``replace_file``, ``write_file``), with a size and CRC-32 sidecar written last where a
reader checks it (``write_verified`` / ``read_verified``).
"""

from tf_hvd.checkpoint.atomic import (read_verified, replace_file, write_file,
                                     write_verified)
from tf_hvd.checkpoint.commit import StepWriter, new_token, prune, publish
from tf_hvd.checkpoint.steps import Step, complete_steps, partial_dirs, step_name

__all__ = ["StepWriter", "publish", "prune", "new_token", "Step", "complete_steps",
           "partial_dirs", "step_name", "replace_file", "write_file", "write_verified",
           "read_verified"]
