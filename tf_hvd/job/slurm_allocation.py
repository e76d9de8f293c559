"""tfhvdrun inside a Slurm allocation (salloc, sbatch): hosts from Slurm, ranks by srun.

When neither -H nor --hostfile is given and tfhvdrun runs inside an allocation (outside
a job step), the hosts are the allocation's nodes (SLURM_JOB_NODELIST) with as many
slots each as Slurm gives it tasks (SLURM_TASKS_PER_NODE, else its CPUs,
SLURM_JOB_CPUS_PER_NODE), as horovodrun does under LSF. Ranks on the other nodes are
then started with ``srun`` (one single-task step each, ``--overlap`` so that they share
the allocation's CPUs with the batch step) instead of ssh: compute nodes need no ssh
keys, and srun hands the rank's environment (its rendezvous secret included) to the
node over Slurm's munge-authenticated launch protocol, never on a command line.

    # sbatch -N 2 --ntasks-per-node 2 job.sh, with job.sh running:
    tfhvdrun -np 4 python train.py      # h1:2,h2:2 from Slurm; h2's ranks via srun
"""

import os
import shutil

from . import rank_env
from .slurm_hostlist import HostlistError, expand_hostlist, expand_tasks_per_node

from .host_spec import HostSlots, HostSpecError


def in_allocation(environ):
    """True inside an allocation's batch script or salloc shell, not inside a step's
    task (there, srun's variables describe the task's own step)."""
    return bool(environ.get("SLURM_JOB_ID") and environ.get("SLURM_JOB_NODELIST")
                and not environ.get("SLURM_STEP_ID") and not environ.get("SLURM_STEPID"))


def allocation_hosts(environ):
    """(list of HostSlots, description) of the allocation, or None outside one."""
    if not in_allocation(environ):
        return None
    nodelist = environ["SLURM_JOB_NODELIST"]
    counts_name = ("SLURM_TASKS_PER_NODE" if environ.get("SLURM_TASKS_PER_NODE")
                   else "SLURM_JOB_CPUS_PER_NODE")
    try:
        names = expand_hostlist(nodelist)
        counts = expand_tasks_per_node(environ.get(counts_name, ""))
    except HostlistError as e:
        raise HostSpecError("the Slurm allocation: %s" % e)
    if len(counts) != len(names):
        raise HostSpecError("the Slurm allocation: %d nodes (SLURM_JOB_NODELIST=%s) but %d "
                            "counts in %s" % (len(names), nodelist, len(counts), counts_name))
    where = "the Slurm allocation (SLURM_JOB_NODELIST=%s, %s=%s)" % (
        nodelist, counts_name, environ.get(counts_name))
    return [HostSlots(n, c) for n, c in zip(names, counts)], where


def srun_path():
    return shutil.which("srun")


def srun_argv(host, command, cwd):
    """argv that runs ``command`` as one task on ``host`` of this allocation. srun
    exports the caller's whole environment (the rank's variables are put there)."""
    return [srun_path(), "--nodes=1", "--ntasks=1", "--nodelist=%s" % host, "--overlap",
            "--export=ALL", "--kill-on-bad-exit=1", "--quiet", "--unbuffered",
            "--chdir=%s" % cwd] + list(command)


def launcher_for(hosts_given, environ=None):
    """'srun' when the hosts came from the allocation and srun is there, else None."""
    environ = os.environ if environ is None else environ
    if hosts_given or not in_allocation(environ) or not srun_path():
        return None
    if environ.get(rank_env.SLURM_LAUNCH, "srun") == "ssh":
        return None  # the user prefers ssh between the nodes
    return "srun"
