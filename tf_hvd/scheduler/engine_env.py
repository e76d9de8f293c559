"""Which engine started this process, and the job it belongs to (pure Python).

hvd.init() reads its topology from HOROVOD_* variables (tfhvdrun sets them) or from
MPI (mpirun, mpiexec, ``srun --mpi=pmi2``). A process started by another engine sees
that engine's variables instead; :func:`resolve` maps them onto a :class:`Job`:

* Slurm's ``srun``: SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS),
  SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE.
  Rank 0 serves the rendezvous on the step's first node (rank 0 must run there: block
  distribution, Slurm's default) at MASTER_PORT, else at a port made from the job and
  step ids (``MASTER_ADDR``/``MASTER_PORT`` override both).
* torchrun's contract (Kubeflow Trainer's plain runtime, SageMaker, ...): MASTER_ADDR,
  MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (GROUP_RANK and
  GROUP_WORLD_SIZE when present).
* TensorFlow's TF_CONFIG and Vertex AI's CLUSTER_SPEC (Ray Train's TensorflowTrainer,
  Kubeflow's TFJob, Vertex AI): tf_hvd.scheduler.tf_config. When RANK/WORLD_SIZE are set
  too, both must give this process the same rank and size.

A process that sees such variables for a job of more than one process but cannot make
a job of them raises :class:`SchedulerEnvError` saying what is missing: it never trains
alone. ``None`` means "nothing to do": tfhvdrun or an MPI launcher started it, or no
engine did (a job of one process).

    >>> job = resolve({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
    ...                "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
    ...                "MASTER_PORT": "29500"})
    >>> job.rank, job.size, job.engine
    (1, 2, 'torchrun')
"""

import socket

from tf_hvd.job import rank_env
from tf_hvd.job.slurm_hostlist import HostlistError, expand_hostlist, expand_tasks_per_node

from tf_hvd.job.placement import cross_of_counts
from .job import Job, SchedulerEnvError
from .tf_config import resolve_tf_config

__all__ = ["Job", "SchedulerEnvError", "horovod_env", "local_address", "resolve"]

# Started by a launcher the core understands by itself.
_LAUNCHER_VARS = (rank_env.RANK, rank_env.ELASTIC_JOIN)
_MPI_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
# The Slurm rendezvous port when MASTER_PORT is not given: PORT_BASE + (a number made
# from the job and step ids) % PORT_SPAN, so that steps sharing a node rarely collide.
PORT_BASE = 20000
PORT_SPAN = 20000




def _int(environ, name, engine, minimum=0):
    text = environ.get(name)
    if text is None or text == "":
        raise SchedulerEnvError("%s: %s is not set" % (engine, name))
    try:
        value = int(text)
    except ValueError:
        raise SchedulerEnvError("%s: %s=%r is not an integer" % (engine, name, text))
    if value < minimum:
        raise SchedulerEnvError("%s: %s=%d must be at least %d" % (engine, name, value, minimum))
    return value


def _port(environ, engine):
    port = _int(environ, "MASTER_PORT", engine, 1)
    if port > 65535:
        raise SchedulerEnvError("%s: MASTER_PORT=%d is not a TCP port" % (engine, port))
    return port


def _present(environ, names):
    return [n for n in names if environ.get(n)]


def _torchrun(environ):
    engine = "torchrun-style environment (RANK/WORLD_SIZE)"
    size = _int(environ, "WORLD_SIZE", engine, 1)
    rank = _int(environ, "RANK", engine)
    if size == 1:
        return None
    if rank >= size:
        raise SchedulerEnvError("%s: RANK=%d is not below WORLD_SIZE=%d" % (engine, rank, size))
    missing = [n for n in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(n)]
    if missing:
        raise SchedulerEnvError(
            "%s: this process is rank %d of %d but %s %s not set, so it cannot meet the "
            "other ranks (it will not train alone); set MASTER_ADDR to rank 0's host and "
            "MASTER_PORT to a free port on it, the same on every rank"
            % (engine, rank, size, " and ".join(missing), "is" if len(missing) == 1 else "are"))
    if environ.get("LOCAL_RANK") is None or environ.get("LOCAL_WORLD_SIZE") is None:
        local_rank, local_size = 0, 1  # one process per host (a pod per rank)
        if environ.get("LOCAL_RANK") not in (None, "0"):
            raise SchedulerEnvError("%s: LOCAL_RANK is set but LOCAL_WORLD_SIZE is not"
                                    % engine)
    else:
        local_rank = _int(environ, "LOCAL_RANK", engine)
        local_size = _int(environ, "LOCAL_WORLD_SIZE", engine, 1)
    if local_rank >= local_size or local_size > size:
        raise SchedulerEnvError("%s: LOCAL_RANK=%d, LOCAL_WORLD_SIZE=%d and WORLD_SIZE=%d do "
                                "not fit together" % (engine, local_rank, local_size, size))
    if environ.get("GROUP_RANK") and environ.get("GROUP_WORLD_SIZE"):
        cross_rank = _int(environ, "GROUP_RANK", engine)
        cross_size = _int(environ, "GROUP_WORLD_SIZE", engine, 1)
    else:  # torchrun places ranks host by host, the same number on each
        cross_rank, cross_size = rank // local_size, -(-size // local_size)
    return Job("torchrun", rank, size, local_rank, local_size, cross_rank, cross_size,
               environ["MASTER_ADDR"], _port(environ, engine), None)


def _slurm(environ):
    engine = "Slurm (srun)"
    size_name = "SLURM_STEP_NUM_TASKS" if environ.get("SLURM_STEP_NUM_TASKS") else "SLURM_NTASKS"
    size = _int(environ, size_name, engine, 1)
    if size == 1:
        return None
    rank = _int(environ, "SLURM_PROCID", engine)
    if not environ.get("SLURM_STEP_ID") and not environ.get("SLURM_STEPID"):
        raise SchedulerEnvError(
            "%s: %s=%d but this process is not a task of a job step (SLURM_STEP_ID is not "
            "set: it runs in the batch script itself), so it would train alone; start it "
            "with `srun python ...` (one task per rank) or with tfhvdrun"
            % (engine, size_name, size))
    local_rank = _int(environ, "SLURM_LOCALID", engine)
    node = _int(environ, "SLURM_NODEID", engine)
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST")
    try:
        hosts = expand_hostlist(nodelist)
        per_node = expand_tasks_per_node(environ.get("SLURM_STEP_TASKS_PER_NODE")
                                         or environ.get("SLURM_TASKS_PER_NODE"))
    except HostlistError as e:
        raise SchedulerEnvError("%s: %s" % (engine, e))
    if len(per_node) != len(hosts) or node >= len(hosts) or sum(per_node) != size:
        raise SchedulerEnvError(
            "%s: the step's nodes %r and tasks per node %r do not make %d tasks"
            % (engine, nodelist, environ.get("SLURM_STEP_TASKS_PER_NODE"), size))
    local_size = per_node[node]
    cross_rank, cross_size = cross_of_counts(per_node, node, local_rank)
    if environ.get("MASTER_ADDR"):
        master = environ["MASTER_ADDR"]
    else:
        if rank == 0 and node != 0:
            raise SchedulerEnvError(
                "%s: rank 0 runs on %s, not on the step's first node %s (a task distribution "
                "other than block); set MASTER_ADDR to rank 0's host" % (engine, hosts[node],
                                                                      hosts[0]))
        master = hosts[0]
    if environ.get("MASTER_PORT"):
        port = _port(environ, engine)
    else:
        job_id = _int(environ, "SLURM_JOB_ID", engine)
        step = int(environ.get("SLURM_STEP_ID") or environ.get("SLURM_STEPID"))
        port = PORT_BASE + (job_id * 31 + step) % PORT_SPAN
    return Job("slurm", rank, size, local_rank, local_size, cross_rank, cross_size, master,
               port, hosts[node])


def resolve(environ):
    """The job this process's engine describes, or None (see the module docstring)."""
    if _present(environ, _LAUNCHER_VARS) or _present(environ, _MPI_VARS):
        return None
    if environ.get(rank_env.CONTROLLER) == "mpi":
        return None  # the user chose MPI; the core checks the rest
    tf_job = resolve_tf_config(environ)
    if environ.get("RANK") is not None or environ.get("WORLD_SIZE") is not None:
        torch_job = _torchrun(environ)
        if tf_job is not None and torch_job is not None and (
                tf_job.rank, tf_job.size) != (torch_job.rank, torch_job.size):
            raise SchedulerEnvError(
                "%s makes this process rank %d of %d, but RANK=%d and WORLD_SIZE=%d; unset "
                "one of them" % (tf_job.engine, tf_job.rank, tf_job.size, torch_job.rank,
                                 torch_job.size))
        return tf_job or torch_job
    if tf_job is not None:
        return tf_job
    if environ.get("SLURM_PROCID") is not None and (environ.get("SLURM_STEP_NUM_TASKS")
                                                    or environ.get("SLURM_NTASKS")):
        return _slurm(environ)
    return None


def local_address(master_addr, master_port):
    """The address of this host's interface that reaches ``master_addr`` (what the other
    ranks should connect to); no packet is sent."""
    try:
        infos = socket.getaddrinfo(master_addr, master_port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as e:
        raise SchedulerEnvError("cannot resolve MASTER_ADDR=%s: %s" % (master_addr, e))
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(infos[0][4])
        return probe.getsockname()[0]
    except OSError as e:
        raise SchedulerEnvError("no route to MASTER_ADDR=%s: %s" % (master_addr, e))
    finally:
        probe.close()


def horovod_env(job, hostname, secret=None):
    """The HOROVOD_* variables the core reads, for ``job`` (its RankEnv); ``hostname``
    is the address this rank publishes for Gloo's connections."""
    return rank_env.RankEnv(
        rank=job.rank, size=job.size, local_rank=job.local_rank, local_size=job.local_size,
        cross_rank=job.cross_rank, cross_size=job.cross_size, hostname=hostname,
        slot_hostname=job.host or socket.gethostname(), rendezvous_addr=job.master_addr,
        rendezvous_port=job.master_port, secret=secret).to_environ()
