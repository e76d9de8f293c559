"""Jobs that no tf_hvd launcher started: Slurm's srun, torchrun-style environments and
TensorFlow's TF_CONFIG (Ray Train's TensorflowTrainer, Kubeflow's TFJob, Vertex AI).

hvd.init() calls :func:`prepare` first. When the environment describes a job of
several processes (tf_hvd.scheduler.engine_env), it sets the HOROVOD_* variables the core
reads, makes rank 0 serve the authenticated rendezvous at MASTER_ADDR:MASTER_PORT and
checks every rank in (tf_hvd.scheduler.meet), with the secret of
tf_hvd.job.secret. Pure Python: no TensorFlow import.

    # on each of two hosts, or twice on one (MASTER_ADDR=127.0.0.1):
    #   RANK=0|1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \\
    #   MASTER_ADDR=host0 MASTER_PORT=29500 python train.py
    import tf_hvd as hvd
    hvd.init()      # rank 0 serves the rendezvous, rank 1 meets it there
"""

import os

from . import meet
from .engine_env import SchedulerEnvError, horovod_env, local_address, resolve
from tf_hvd.job.secret import SECRET_ENV, SecretError, job_secret
from .tf_config import tf_config_task as _tf_config_task

__all__ = ["SchedulerEnvError", "SecretError", "prepare", "resolve", "tf_config_task"]

DEFAULT_START_TIMEOUT_S = 120.0


def tf_config_task(environ=None):
    """This process's (task type, index) in TF_CONFIG or Vertex AI's CLUSTER_SPEC, or None.

    A script that a platform also starts as a side-car evaluator (whose hvd.init() raises
    SchedulerEnvError: evaluators are not ranks) checks its role first.

    Example:
        >>> import tf_hvd
        >>> tf_hvd.scheduler.tf_config_task({})  # no TF_CONFIG: None
    """
    return _tf_config_task(os.environ if environ is None else environ)


def prepare(environ=None, start_timeout_s=None):
    """Turn an engine's environment into the core's; returns the Job or None.

    ``environ`` (default os.environ) is updated in place. ``start_timeout_s`` bounds
    the check-in: seconds, or a function returning them, called only when there is a
    job to join (HOROVOD_START_TIMEOUT as the core parses it; None or 0: 120 s).
    Raises SchedulerEnvError (or SecretError) when this process cannot join its job.
    """
    environ = os.environ if environ is None else environ
    job = resolve(environ)
    if job is None:
        return None
    secret, _ = job_secret(environ)
    if callable(start_timeout_s):
        start_timeout_s = start_timeout_s()
    # Meet first: on Kubernetes rank 0's name may resolve only once its pod runs, and
    # meet() waits for that within the start time-out.
    meet.meet(job, secret, start_timeout_s or DEFAULT_START_TIMEOUT_S)
    environ.update(horovod_env(job, local_address(job.master_addr, job.master_port), secret))
    return job
