"""Fixtures shared by the multi-process tests."""

import pytest

from namespace_hosts import namespace_cluster


@pytest.fixture(scope="module")
def cluster(request):
    """The module's namespace cluster (tests/parallel/namespace_hosts.py): hosts h1 and
    h2, or as many as the module's ``CLUSTER_HOSTS``; skipped where none can be made."""
    module = request.module
    with namespace_cluster(getattr(module, "CLUSTER_HOSTS", 2), module.__name__) as c:
        yield c
