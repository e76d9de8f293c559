"""Settings of a Ray job (what ``RayExecutor.create_settings`` returns).

Horovod's ``create_settings`` takes ssh options because its ranks could be started over
ssh; here Ray starts every rank, so ``ssh_identity_file`` and ``ssh_str`` are accepted
for compatibility and not used.
"""

import collections

RaySettings = collections.namedtuple(
    "RaySettings",
    ["timeout_s", "placement_group_timeout_s", "nics", "verbose",
     # elastic runs only
     "min_np", "max_np", "reset_limit", "elastic_timeout", "cooldown_range",
     "discovery_interval_s"])


def create_settings(timeout_s=30, ssh_identity_file=None, ssh_str=None,
                    placement_group_timeout_s=100, nics=None, verbose=False,
                    min_np=1, max_np=None, reset_limit=None, elastic_timeout=600,
                    cooldown_range=None, discovery_interval_s=1.0):
    """Settings for RayExecutor / ElasticRayExecutor.

    ``timeout_s`` bounds the start of the ranks (actors ready, every rank at the
    rendezvous); ``placement_group_timeout_s`` how long ``start()`` waits for Ray to
    reserve the workers' resources; ``nics``: interfaces Gloo binds (the first one is
    passed as HOROVOD_GLOO_IFACE). The elastic fields are used by ElasticRayExecutor.

    >>> settings = create_settings(timeout_s=60)  # doctest: +SKIP
    >>> settings.timeout_s  # doctest: +SKIP
    60
    """
    del ssh_identity_file, ssh_str  # Ray starts the ranks: no ssh
    if min_np is not None and int(min_np) < 1:
        raise ValueError("min_np must be at least 1, got %r" % (min_np,))
    if max_np is not None and min_np is not None and int(max_np) < int(min_np):
        raise ValueError("max_np (%r) must not be below min_np (%r)" % (max_np, min_np))
    return RaySettings(timeout_s=float(timeout_s),
                       placement_group_timeout_s=float(placement_group_timeout_s),
                       nics=list(nics) if nics else None, verbose=bool(verbose),
                       min_np=min_np, max_np=max_np, reset_limit=reset_limit,
                       elastic_timeout=float(elastic_timeout),
                       cooldown_range=cooldown_range,
                       discovery_interval_s=float(discovery_interval_s))
