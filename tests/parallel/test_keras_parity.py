"""Horovod parity of tf_hvd.keras at np=2 (Gloo), in one job started with
TF_USE_LEGACY_KERAS=1: tf-keras 2 optimizers (new and legacy) in model.fit and
tape loops, callbacks, load_model(legacy_opts=), PartialDistributedOptimizer /
register_local_var / scale_local_gradients, BroadcastGlobalVariablesCallback(
local_variables=), SyncBatchNormalization == BatchNormalization over the
global batch (Keras 3 and tf-keras). See training_workers/train_keras_parity.py.
"""

import os
import re

from training_launch import run

HERE = os.path.dirname(os.path.abspath(__file__))


def test_keras_parity_np2(tmp_path):
    rc, out = run(2, "gloo", os.path.join(HERE, "training_workers", "train_keras_parity.py"),
                  [str(tmp_path)], timeout=400, env={"TF_USE_LEGACY_KERAS": "1"})
    oks = re.findall(r"\[rank (\d+)\] TRAINING OK (\d+) checks", out)
    failures = [line for line in out.splitlines()
                if "FAIL" in line or "EXCEPTION" in line or "Traceback" in line]
    assert rc == 0 and len(set(r for r, _ in oks)) == 2, (
        "exit code %d\n%s\n--- output tail ---\n%s"
        % (rc, "\n".join(failures[:40]), out[-8000:]))
    assert len(set(n for _, n in oks)) == 1, oks
