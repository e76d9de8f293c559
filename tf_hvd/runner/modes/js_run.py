"""``tfhvdrun --jsrun``: inside an LSF job, start the ranks with jsrun (IBM Spectrum
MPI's launcher) and use the MPI transport, as ``horovodrun --jsrun``::

    jsrun --erf_input RANKFILE [--smpiargs "<--mpi-args>"] \\
        python rank_wrapper.py [...] -- python train.py

The rank file (jsrun's explicit resource file) puts each rank on its host from the plan
(the LSF job's hosts unless -H/--hostfile) and gives the ranks of a host equal shares of
its CPUs (its LSF slots, else this machine's CPU count); ``--binding-args`` replaces the
rank file with jsrun options of your own. The ranks run under rank_wrapper.py and are
supervised as under ``--mpi`` (mpi_run.py).
"""

import os
import shlex
import shutil

from ...job import lsf_hosts


def find_jsrun(path=None):
    """Absolute path of jsrun on PATH, or None."""
    return shutil.which("jsrun", path=path)


def rankfile_text(slots, cpus_per_host):
    """jsrun ERF text: one line per rank, ``slots`` in rank order (placement.RankSlot or
    anything with .rank and .hostname); ``cpus_per_host``: host -> CPUs to share."""
    per_host = {}
    for slot in slots:
        per_host.setdefault(slot.hostname, []).append(slot.rank)
    lines = ["overlapping_rs: allow", "cpu_index_using: logical", ""]
    for slot in slots:
        ranks = per_host[slot.hostname]
        share = max(1, cpus_per_host.get(slot.hostname, os.cpu_count() or 1) // len(ranks))
        first = ranks.index(slot.rank) * share
        lines.append("rank: %d: { hostname: %s; cpu: {%d-%d} ; gpu: * ; mem: * }"
                     % (slot.rank, slot.hostname, first, first + share - 1))
    return "\n".join(lines) + "\n"


def jsrun_command(jsrun, wrapped, rankfile=None, mpi_args=None, binding_args=None):
    """argv: ``jsrun <binding> [--smpiargs ARGS] <wrapped command>``; ``binding_args``
    (a string) replaces ``--erf_input rankfile``."""
    argv = [jsrun]
    if binding_args is not None:
        argv += shlex.split(binding_args)
    else:
        argv += ["--erf_input", rankfile]
    if mpi_args:
        argv += ["--smpiargs", mpi_args]
    return argv + list(wrapped)


def write_rankfile(plan, directory, environ=None):
    """Writes the plan's rank file into ``directory``; returns its path."""
    cpus = dict(lsf_hosts.job_hosts(os.environ if environ is None else environ))
    path = os.path.join(directory, "ranks.erf")
    with open(path, "w") as f:
        f.write(rankfile_text(plan.slots, cpus))
    return path
