"""tf_hvd on Ray: RayExecutor and ElasticRayExecutor (Horovod's horovod.ray API).

Needs the ``ray`` package (tools/requirements.txt). See docs/ray.md.
"""

from tf_hvd.ray.executor import RayExecutor
from tf_hvd.ray.elastic import ElasticRayExecutor

__all__ = ["RayExecutor", "ElasticRayExecutor"]
