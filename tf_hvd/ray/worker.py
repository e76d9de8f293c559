"""The Ray actor that hosts one rank: it takes the rank's environment (topology,
rendezvous address and secret) before any tf_hvd code runs in it, then runs the
functions the executor sends.

The secret reaches the actor as an argument of ``set_env`` (Ray's own, authenticated
channel between driver and workers), never on a command line or in ``ray status``.
"""

import os
import socket


class RankWorker(object):
    """One rank (a Ray actor; the executors create it with ``ray.remote``)."""

    def __init__(self):
        self.executable = None

    def node(self):
        """(node id, node IP, host name, GPU ids Ray gave this actor)."""
        import ray
        context = ray.get_runtime_context()
        try:
            gpus = [str(g) for g in ray.get_gpu_ids()]
        except Exception:  # noqa: BLE001 - no GPU support in this Ray
            gpus = []
        return (context.get_node_id(), ray.util.get_node_ip_address(), socket.gethostname(),
                gpus)

    def set_env(self, env):
        """Set the rank's variables (before hvd.init() runs here)."""
        os.environ.update({k: str(v) for k, v in env.items()})

    def env(self, name):
        return os.environ.get(name)

    def pid(self):
        return os.getpid()

    def start_executable(self, executable_cls, args, kwargs):
        """``executable_cls(*args, **kwargs)``, made after the environment is set."""
        if executable_cls is not None:
            self.executable = executable_cls(*(args or ()), **(kwargs or {}))

    def execute(self, fn):
        """``fn(executable)`` (Horovod's ``execute``: None without an executable_cls)."""
        return fn(self.executable)

    def run(self, fn, args=None, kwargs=None):
        return fn(*(args or ()), **(kwargs or {}))
