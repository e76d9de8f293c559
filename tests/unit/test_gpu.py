"""GPU collectives of the CUDA variant. They run whenever TensorFlow sees a GPU and the
imported tf_hvd was built with CUDA (tools/build/build_lib.sh --cuda), and are skipped otherwise,
saying which. With one GPU, NCCL runs at np=1 and host staging (HOROVOD_GPU_OPERATIONS=gloo)
at np=2, since NCCL allows one rank per GPU. Every op and dtype (float16 and bfloat16
included), fusion in device memory, CPU and GPU tensors in one step
(gpu_workers/gpu_collectives.py) and a Keras fit on the GPU (gpu_workers/gpu_keras_fit.py).
"""
import os

import pytest

from jobrunner import PYTHON, job_env, run, tfhvdrun_cmd

HERE = os.path.dirname(os.path.abspath(__file__))


def _skip_reason():
    import tensorflow as tf
    import tf_hvd
    if not tf_hvd.cuda_built():
        return "the imported tf_hvd is the CPU variant (build with tools/build/build_lib.sh --cuda)"
    if not tf.config.list_physical_devices("GPU"):
        return "TensorFlow sees no GPU on this machine"
    return None


REASON = _skip_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))


def _run(np_, program, marker, extra=None):
    env = job_env(dict({"TF_FORCE_GPU_ALLOW_GROWTH": "true"}, **(extra or {})))
    res = run(tfhvdrun_cmd(np_) + [PYTHON, os.path.join(HERE, "gpu_workers", program)],
              timeout=300, env=env)
    assert res.ok, res.describe(text=res.output[-6000:])
    assert res.output.count(marker) == np_, res.output[-3000:]


def test_every_collective_on_gpu_with_nccl_at_np1():
    _run(1, "gpu_collectives.py", "GPU-COLLECTIVES-OK", {"HOROVOD_GPU_OPERATIONS": "nccl"})


def test_every_collective_on_gpu_staged_through_host_at_np2():
    _run(2, "gpu_collectives.py", "GPU-COLLECTIVES-OK", {"HOROVOD_GPU_OPERATIONS": "gloo"})


def test_keras_fit_on_gpu():
    _run(1, "gpu_keras_fit.py", "GPU-KERAS-OK")
    _run(2, "gpu_keras_fit.py", "GPU-KERAS-OK", {"HOROVOD_GPU_OPERATIONS": "gloo"})
