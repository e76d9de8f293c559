"""tfhvdrun in the launcher pod of Kubeflow's MPI Operator (MPIJob v2beta1) or of
Kubeflow Trainer's MPI runtime: the hosts come from the hostfile they mount.

The operator mounts the workers' list at /etc/mpi/hostfile (``host slots=N`` lines for
Open MPI, ``host:N`` for MPICH and Intel MPI; tfhvdrun reads both) and names it in the
launcher's environment for its MPI flavour. When neither -H nor --hostfile is given,
tfhvdrun uses that file, as ``mpirun`` would, so the launcher's command can be just
``tfhvdrun -np 4 python train.py`` (Gloo) or ``tfhvdrun --mpi -np 4 python train.py``.
The ssh keys the operator mounts in ~/.ssh are what ssh uses by default.

    >>> hostfile({"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"})  # doctest: +SKIP
    '/etc/mpi/hostfile'
"""

import os

# The variables each MPI flavour's launcher reads its default hostfile from, as the
# MPI Operator sets them (Open MPI, MPICH's hydra, Intel MPI's hydra).
HOSTFILE_VARS = ("OMPI_MCA_orte_default_hostfile", "HYDRA_HOST_FILE", "I_MPI_HYDRA_HOST_FILE")


def hostfile(environ):
    """The default hostfile an MPI launcher would use here, or None."""
    for name in HOSTFILE_VARS:
        path = environ.get(name)
        if path and os.path.isfile(path):
            return path
    return None


def hostfile_hosts(environ, parse_hostfile):
    """(list of HostSlots, description) from that hostfile, or None."""
    path = hostfile(environ)
    if path is None:
        return None
    name = next(n for n in HOSTFILE_VARS if environ.get(n) == path)
    return parse_hostfile(path), "the MPI launcher's hostfile (%s=%s)" % (name, path)
