"""Horovod's own TF2/Keras examples, ported with only the import lines changed
(python/examples/horovod/, each file's first line says what else changed), run
briefly at np=2 under tf-keras (TF_USE_LEGACY_KERAS=1), as their Keras 2 code
needs. One test runs the three one after the other, each in its own job in a
fresh directory (they write checkpoints to the current directory).
"""

import os
import re

import pytest

from jobrunner import PYTHON, REPO, base_env, tfhvdrun_cmd
from jobrunner import run as run_command

EXAMPLES = os.path.join(REPO, "python", "examples", "horovod")

CASES = [
    # script, arguments, environment, what rank 0 must print
    ("tensorflow2_keras_mnist.py", [],
     {"EXAMPLE_EPOCHS": "2", "EXAMPLE_STEPS_PER_EPOCH": "3"},
     r"finished gradual learning rate warmup|Epoch 2/2"),
    ("tensorflow2_mnist.py", [], {"EXAMPLE_STEPS": "12"}, r"Step #10\tLoss: [0-9.]+"),
    ("tensorflow2_synthetic_benchmark.py",
     ["--model", "MobileNetV3Small", "--batch-size", "2", "--num-warmup-batches", "1",
      "--num-batches-per-iter", "1", "--num-iters", "2", "--no-cuda"], {},
     r"Total img/sec on 2 CPU\(s\): [0-9.]+"),
]


def test_horovod_examples_np2(tmp_path):
    for script, args, env, expected in CASES:
        cwd = tmp_path / script[:-3]
        cwd.mkdir()
        extra = dict(env, TF_USE_LEGACY_KERAS="1",
                     PYTHONPATH=EXAMPLES + os.pathsep + REPO)
        cmd = tfhvdrun_cmd(2) + [PYTHON, os.path.join(EXAMPLES, script)] + args
        res = run_command(cmd, 480, env=base_env(extra), cwd=str(cwd))
        if res.timed_out:
            pytest.fail(res.describe(text=res.output[-20000:]))
        out = res.output
        assert res.returncode == 0, "%s failed:\n%s" % (script, out[-8000:])
        assert re.search(r"\[0\]<stdout>:.*(%s)" % expected, out), (
            "%s: rank 0 did not print %r:\n%s" % (script, expected, out[-6000:]))
        assert not re.search(r"\[1\]<stdout>:.*(%s)" % expected, out), script
        if script != "tensorflow2_synthetic_benchmark.py":
            assert any(cwd.iterdir()), "%s wrote no checkpoint" % script
