"""The elastic policy's old address: it lives beside the static one, in
runner/agent/elastic_policy.py. This name stays only until modes/gloo_run.py imports it
from there; test_api_imports places it in the policies' layer.

    from tf_hvd.runner.agent.elastic_policy import ElasticPolicy   # use this
"""

from ..agent.elastic_policy import ElasticPolicy  # noqa: F401 (re-exported)
