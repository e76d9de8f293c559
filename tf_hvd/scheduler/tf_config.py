"""TensorFlow's TF_CONFIG and Vertex AI's CLUSTER_SPEC mapped onto a job (pure Python).

Every platform that launches MultiWorkerMirroredStrategy describes the job this way: Ray
Train's TensorflowTrainer, Kubeflow's TFJob and Vertex AI custom training start one
process per task and give each the cluster and its own task::

    TF_CONFIG='{"cluster": {"chief": ["c0:2222"], "worker": ["w0:2222", "w1:2222"]},
                "task": {"type": "worker", "index": 1}}'

The ranks are the training tasks in one order: the chief (TF1's "master" is the same
role) first, then the workers by index. ``ps`` and ``evaluator`` tasks are not ranks (tf_hvd
has no parameter servers; a side-car evaluator runs without hvd.init()): hvd.init() in one
of them raises :class:`SchedulerEnvError` rather than train a job of its own. Rank 0
serves the rendezvous at its own address from the cluster (the port the platform opened
for MultiWorkerMirroredStrategy's server); local rank and size count the tasks whose
addresses share a host.

Vertex AI also sets CLUSTER_SPEC, whose pools map onto the same roles: ``workerpool0`` is
the chief, ``workerpool1`` the workers, ``workerpool2`` (parameter servers or the
Reduction Server) and ``workerpool3`` (evaluators) are not ranks. When both variables are
set they must make this process the same rank of the same job.

    >>> job = resolve_tf_config({"TF_CONFIG": '{"cluster": {"chief": ["c0:2222"], '
    ...     '"worker": ["w0:2222", "w1:2222"]}, "task": {"type": "worker", "index": 1}}'})
    >>> job.rank, job.size, job.master_addr, job.master_port
    (2, 3, 'c0', 2222)
"""

import json

from .job import Job, SchedulerEnvError, cross_of

RANK_TYPES = ("chief", "master", "worker")
NOT_RANKS = {
    "ps": "tf_hvd averages gradients with collectives and needs no parameter servers: "
          "leave the ps replicas out of the job",
    "evaluator": "a side-car evaluator does not train: do not call hvd.init() in it "
                 "(tf_hvd.scheduler.tf_config_task() tells a process its task)",
}
# Vertex AI's worker pools in the roles TF_CONFIG gives them on Vertex.
VERTEX_POOLS = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps",
                "workerpool3": "evaluator"}


def _load(environ, name):
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        spec = json.loads(text)
    except ValueError as e:
        raise SchedulerEnvError("%s is not valid JSON (%s)" % (name, e))
    if not isinstance(spec, dict):
        raise SchedulerEnvError("%s must be a JSON object, not %s" % (name, type(spec).__name__))
    return spec


def _tasks(spec, name):
    """{type: [address, ...]} from the spec's cluster, checked."""
    cluster = spec.get("cluster", {})
    if not isinstance(cluster, dict):
        raise SchedulerEnvError("%s: cluster must be an object of task types" % name)
    tasks = {}
    for kind, addresses in cluster.items():
        if isinstance(addresses, dict):  # TensorFlow's sparse form {"0": "host:port"}
            try:
                keys = sorted(int(k) for k in addresses)
            except ValueError:
                raise SchedulerEnvError("%s: cluster.%s has a task index that is not an "
                                        "integer: %r" % (name, kind, sorted(addresses)))
            if keys != list(range(len(keys))):
                raise SchedulerEnvError("%s: cluster.%s lists tasks %s; tf_hvd needs every "
                                        "index from 0" % (name, kind, keys))
            addresses = [addresses.get(str(k), addresses.get(k)) for k in keys]
        if not isinstance(addresses, list):
            raise SchedulerEnvError("%s: cluster.%s must be a list of host:port addresses"
                                    % (name, kind))
        for i, address in enumerate(addresses):
            _split(address, "%s: cluster.%s[%d]" % (name, kind, i))
        tasks[kind] = list(addresses)
    unknown = sorted(set(tasks) - set(RANK_TYPES) - set(NOT_RANKS))
    if unknown:
        raise SchedulerEnvError(
            "%s: cluster has task type %s, which tf_hvd cannot place (it trains on chief "
            "and worker tasks; ps and evaluator tasks are not ranks)"
            % (name, ", ".join(repr(k) for k in unknown)))
    if tasks.get("chief") and tasks.get("master"):
        raise SchedulerEnvError("%s: cluster has both a chief and a master; they are one "
                                "role, give one of them" % name)
    for role in ("chief", "master"):
        if len(tasks.get(role, [])) > 1:
            raise SchedulerEnvError("%s: cluster.%s lists %d tasks; a job has one %s"
                                    % (name, role, len(tasks[role]), role))
    seen = {}
    for kind, addresses in tasks.items():
        for i, address in enumerate(addresses):
            where = "cluster.%s[%d]" % (kind, i)
            if address in seen:
                raise SchedulerEnvError("%s: %s and %s have the same address %s; every task "
                                        "needs its own host:port" % (name, seen[address],
                                                                    where, address))
            seen[address] = where
    return tasks


def _split(address, where):
    if not isinstance(address, str) or address.count(":") < 1:
        raise SchedulerEnvError("%s=%r is not a host:port address" % (where, address))
    host, _, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port)
    except ValueError:
        port = -1
    if not host or not 0 < port < 65536:
        raise SchedulerEnvError("%s=%r is not a host:port address" % (where, address))
    return host, port


def _task(spec, tasks, name, type_key="type"):
    task = spec.get("task")
    if not isinstance(task, dict) or task.get(type_key) in (None, ""):
        raise SchedulerEnvError(
            "%s describes a cluster of %d training tasks but not this process's task "
            "(task.type and task.index); every process needs its own" % (name, _size(tasks)))
    kind = task[type_key]
    try:
        index = int(task.get("index", 0))
    except (TypeError, ValueError):
        raise SchedulerEnvError("%s: task.index=%r is not an integer" % (name, task["index"]))
    if kind not in tasks:
        raise SchedulerEnvError("%s: task.type is %r but the cluster has no %s (it has %s)"
                                % (name, kind, kind, ", ".join(sorted(tasks)) or "no tasks"))
    if not 0 <= index < len(tasks[kind]):
        raise SchedulerEnvError("%s: task.index=%d is out of range: cluster.%s has %d task(s)"
                                % (name, index, kind, len(tasks[kind])))
    return kind, index


def _size(tasks):
    return sum(len(tasks.get(k, [])) for k in RANK_TYPES)


def _job(tasks, kind, index, name, engine):
    """The Job of task ``kind[index]`` in ``tasks``."""
    if kind in NOT_RANKS:
        raise SchedulerEnvError("%s: this process is task %s[%d], and %s tasks are not ranks "
                                "of a tf_hvd job; %s" % (name, kind, index, kind,
                                                         NOT_RANKS[kind]))
    order = [(k, i) for k in RANK_TYPES for i in range(len(tasks.get(k, [])))]
    rank = order.index((kind, index))
    hosts = [_split(tasks[k][i], "")[0] for k, i in order]
    master_addr, master_port = _split(tasks[order[0][0]][0], "")
    host = hosts[rank]
    local_rank = hosts[:rank].count(host)
    local_size = hosts.count(host)
    cross_rank, cross_size = cross_of(hosts, rank)
    if name == "TF_CONFIG":
        first = "TF_CONFIG's cluster.%s[0]" % order[0][0]
    else:
        first = "CLUSTER_SPEC's cluster.workerpool%d[0]" % (0 if order[0][0] != "worker" else 1)
    return Job(engine, rank, len(order), local_rank, local_size, cross_rank, cross_size,
               master_addr, master_port, host, first)


def _job_of_task(spec, tasks, name, engine):
    """The Job of ``spec``'s task, or None for the one training task of a cluster."""
    kind, index = _task(spec, tasks, name)
    if _size(tasks) == 1 and kind in RANK_TYPES:
        return None
    return _job(tasks, kind, index, name, engine)


def _from_tf_config(spec):
    tasks = _tasks(spec, "TF_CONFIG")
    if not spec.get("task") and _size(tasks) <= 1:
        return None  # no cluster, or a cluster of one: a job of one
    if _size(tasks) == 0:
        raise SchedulerEnvError("TF_CONFIG: the cluster has no chief or worker task to train")
    return _job_of_task(spec, tasks, "TF_CONFIG", "TF_CONFIG")


def _from_cluster_spec(spec):
    pools = _tasks_of_pools(spec)
    if _size(pools) <= 1 and not spec.get("task"):
        return None
    task = spec.get("task")
    pool = task.get("type") if isinstance(task, dict) else None
    if pool is not None and pool not in VERTEX_POOLS:
        raise SchedulerEnvError("CLUSTER_SPEC: task.type is %r, not one of Vertex AI's worker "
                                "pools %s" % (pool, ", ".join(sorted(VERTEX_POOLS))))
    roles = {"cluster": {VERTEX_POOLS[p]: a for p, a in spec["cluster"].items()},
             "task": dict(task, type=VERTEX_POOLS[pool]) if pool else task}
    return _job_of_task(roles, _tasks(roles, "CLUSTER_SPEC"), "CLUSTER_SPEC",
                        "Vertex AI (CLUSTER_SPEC)")


def _tasks_of_pools(spec):
    cluster = spec.get("cluster", {})
    if not isinstance(cluster, dict):
        raise SchedulerEnvError("CLUSTER_SPEC: cluster must be an object of worker pools")
    unknown = sorted(set(cluster) - set(VERTEX_POOLS))
    if unknown:
        raise SchedulerEnvError("CLUSTER_SPEC: cluster has %s, not one of Vertex AI's worker "
                                "pools %s" % (", ".join(map(repr, unknown)),
                                              ", ".join(sorted(VERTEX_POOLS))))
    return {VERTEX_POOLS[p]: a if isinstance(a, list) else [] for p, a in cluster.items()}


def _describe(job):
    return "rank %d of %d" % (job.rank, job.size)


def resolve_tf_config(environ):
    """The job TF_CONFIG and CLUSTER_SPEC describe, or None when they describe none (unset,
    or a cluster of one training task); raises SchedulerEnvError on a malformed or
    contradictory description (see the module docstring)."""
    tf_spec = _load(environ, "TF_CONFIG")
    vertex_spec = _load(environ, "CLUSTER_SPEC")
    tf_job = _from_tf_config(tf_spec) if tf_spec is not None else None
    vertex_job = _from_cluster_spec(vertex_spec) if vertex_spec is not None else None
    if tf_job is not None and vertex_job is not None:
        same = (tf_job.rank, tf_job.size, tf_job.master_addr, tf_job.master_port) == (
            vertex_job.rank, vertex_job.size, vertex_job.master_addr, vertex_job.master_port)
        if not same:
            raise SchedulerEnvError(
                "TF_CONFIG and CLUSTER_SPEC disagree: TF_CONFIG makes this process %s meeting "
                "at %s:%d, CLUSTER_SPEC %s meeting at %s:%d; set one of them, or the same "
                "cluster in both" % (_describe(tf_job), tf_job.master_addr, tf_job.master_port,
                                     _describe(vertex_job), vertex_job.master_addr,
                                     vertex_job.master_port))
    return tf_job or vertex_job


def tf_config_task(environ):
    """This process's (task type, index) in TF_CONFIG (CLUSTER_SPEC's pool mapped onto its
    role), or None: lets a script skip hvd.init() in a side-car evaluator.

        >>> tf_config_task({"TF_CONFIG": '{"cluster": {"worker": ["a:1"], "evaluator": '
        ...                 '["b:1"]}, "task": {"type": "evaluator", "index": 0}}'})
        ('evaluator', 0)
    """
    for name in ("TF_CONFIG", "CLUSTER_SPEC"):
        spec = _load(environ, name)
        task = spec.get("task") if spec else None
        if isinstance(task, dict) and task.get("type"):
            kind = task["type"]
            if name == "CLUSTER_SPEC":
                kind = VERTEX_POOLS.get(kind, kind)
            return kind, int(task.get("index", 0))
    return None
