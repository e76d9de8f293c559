"""The sharded DistributedOptimizer (optimizer state split over the ranks) at
np=1, 2 and 3 over Gloo (training_workers/train_sharded.py runs the checks).

* np=2: equal to the unsharded DistributedOptimizer (model.fit and tf.function
  loops, SGD+momentum and Adam, 24 steps), composed with
  backward_passes_per_step, clipnorm, global_clipnorm, LossScaleOptimizer, fp16
  compression, gradient_predivide_factor and a DistributedGradientTape; bad
  input; then a checkpoint saved sharded (hvd.save_model);
* np=3: the equivalence again, sharding over a process set of 2 of the 3
  ranks, and the np=2 checkpoint resumed sharded and unsharded, equal after 10
  more steps;
* np=1: the np=2 checkpoint resumed likewise;
* tf-keras (TF_USE_LEGACY_KERAS=1, training_workers/train_sharded_tf_keras.py), np=2:
  equal to the unsharded tf-keras DistributedOptimizer (model.fit and a tf.function
  loop, SGD+momentum and Adam, 24 steps; clipnorm, global_clipnorm,
  backward_passes_per_step), hvd.save_model holding the unsharded state, elastic
  commit/restore/re-shard, and the optimizers it refuses.

Every job prints the bytes of Adam's state each rank holds for an 11M-parameter
model (STATE_BYTES lines): at most 1/N of the unsharded state plus one element
per slot and the two scalars every rank keeps whole.
"""

import os
import re

import pytest

from training_launch import assert_training_ok, run

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "training_workers", "train_sharded.py")
TF_KERAS_WORKER = os.path.join(HERE, "training_workers", "train_sharded_tf_keras.py")
STATE = re.compile(r"STATE_BYTES np=(\d+) rank=(\d+) params=(\d+) held=(\d+) "
                   r"unsharded=(\d+) largest_var_slots=(\d+) peak_rss=(\d+) rss_before_fit=(\d+)")


def _check_state_bytes(out, np_):
    rows = [tuple(int(v) for v in m) for m in STATE.findall(out)]
    assert sorted(r[1] for r in rows) == list(range(np_)), out[-4000:]
    for n, r, params, held, unsharded, _, peak, before in rows:
        assert n == np_ and params >= 10000000
        # one element per slot (2 x 4 bytes) above 1/N, plus iterations and
        # learning rate (12 bytes) held whole by every rank
        assert held <= unsharded / np_ + 8 + 12, (r, held, unsharded)
        if np_ == 1:
            assert held == unsharded
        print("np=%d rank %d: Adam state %d of %d bytes unsharded; RSS %.0f MB before "
              "the first step, peak %.0f MB" % (n, r, held, unsharded, before / 1e6,
                                                 peak / 1e6))


def _run(np_, sections, directory, timeout, env=None):
    env = dict(env or {}, TRAINING_ONLY=sections)
    return run(np_, "gloo", WORKER, [str(directory)], timeout=timeout, env=env)


@pytest.fixture(scope="module")
def saved_at_np2(tmp_path_factory):
    directory = tmp_path_factory.mktemp("sharded")
    rc, out = _run(2, "state_bytes,equivalence,composition,bad_input,ckpt_save",
                   directory, 270)
    return directory, rc, out


def test_sharded_np2_equivalence_composition_and_save(saved_at_np2):
    _, rc, out = saved_at_np2
    assert_training_ok(rc, out, 2, same_counts=False)
    _check_state_bytes(out, 2)


def test_sharded_np3_equivalence_and_resume_from_np2(saved_at_np2):
    directory, rc, out = saved_at_np2
    assert rc == 0, "the np=2 job did not save its checkpoint"
    rc, out = _run(3, "state_bytes,equivalence,process_set,bad_input,ckpt_resume",
                   directory, 270, env={"HOROVOD_DYNAMIC_PROCESS_SETS": "1"})
    assert_training_ok(rc, out, 3, same_counts=False)
    _check_state_bytes(out, 3)


def test_sharded_np1_resume_from_np2(saved_at_np2):
    directory, rc, out = saved_at_np2
    assert rc == 0, "the np=2 job did not save its checkpoint"
    rc, out = _run(1, "state_bytes,equivalence,ckpt_resume", directory, 200)
    assert_training_ok(rc, out, 1, same_counts=False)
    _check_state_bytes(out, 1)


def test_sharded_tf_keras_np2_equals_unsharded(tmp_path):
    rc, out = run(2, "gloo", TF_KERAS_WORKER, [str(tmp_path)], timeout=200,
                  env={"TF_USE_LEGACY_KERAS": "1"})
    assert_training_ok(rc, out, 2)
