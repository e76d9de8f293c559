"""tf_hvd.keras.layers.DistributedEmbedding (tables sharded over the ranks) at np=2
and 3 over Gloo; training_workers/train_embedding.py runs the checks, one job per
np covering every configuration:

* np=2: model.fit with hvd.DistributedOptimizer (SGD+momentum, Adagrad, Adam, Ftrl;
  one-hot and multi-hot features, "mod" and "range" tables, a shared table) and a
  tf.function loop with DistributedGradientTape (ragged and sparse weighted
  features; Adam, Ftrl), each equal to one process with plain Embedding tables under
  sparse semantics (rtol 1e-5); bad input; a checkpoint saved whole
  (hvd.save_model) and by rank (save_embedding_shards: a step of the commit
  protocol), loaded back at np=2; a save one rank cannot write fails on both and
  leaves a half-written step that loads ignore (saying so); a flipped byte, a table
  of another size and the earlier layout; seeded tables' initial rows, gathered,
  equal one process's and keras-rs' (kept for np=3); then, tf_hvd shut down,
  plain ``keras.models.load_model`` reads the file's whole tables in rank 0 alone;
* np=3: fit with SGD+momentum and Adagrad, the loop with Adam and Ftrl (so each
  optimizer, one-hot and multi-hot, at both sizes), bad input, and the np=2 checkpoints loaded
  (each rank its rows; the half-written step ignored), 3 more steps equal to the np=2 job's;
  the initial rows equal np=2's, one process's and keras-rs'.
"""

import os

import pytest

from training_launch import assert_training_ok, run

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "training_workers", "train_embedding.py")


def _run(np_, sections, directory, timeout=240):
    return run(np_, "gloo", WORKER, [str(directory)], timeout=timeout,
               env={"TRAINING_ONLY": sections})


@pytest.fixture(scope="module")
def saved_at_np2(tmp_path_factory):
    directory = tmp_path_factory.mktemp("embedding")
    rc, out = _run(2, "fit,loop,bad_input,initial,ckpt_save,ckpt_plain", directory)
    return directory, rc, out


def test_embedding_np2_equivalence_bad_input_and_save(saved_at_np2):
    _, rc, out = saved_at_np2
    assert_training_ok(rc, out, 2, same_counts=False)   # rank 0 alone loads plainly


def test_embedding_np3_equivalence_and_resume_from_np2(saved_at_np2):
    directory, rc, _ = saved_at_np2
    assert rc == 0, "the np=2 job did not save its checkpoint"
    rc, out = _run(3, "fit,loop,bad_input,initial,ckpt_resume", directory)
    assert_training_ok(rc, out, 3)
