"""Inside an IBM Spectrum LSF job: its hosts and slots, as horovodrun takes them (the
launcher's -np and -H defaults there, and jsrun's rank file).

horovodrun in an LSF job (``LSB_JOBID`` set) needs no -np and no -H: it runs one rank
per slot of the job's hosts. tf_hvd reads the hosts from LSF's own variables, which
every LSF job has (Horovod asks IBM CSM, which only some LSF sites run):

* ``LSB_MCPU_HOSTS="hostA 4 hostB 4"``: host, slots, host, slots...;
* else ``LSB_HOSTS="hostA hostA hostB"`` (or the file ``LSB_DJOB_HOSTFILE``): one line
  per slot.

    >>> job_hosts({"LSB_JOBID": "7", "LSB_MCPU_HOSTS": "a 2 b 2"})
    [('a', 2), ('b', 2)]
"""

import collections


def in_lsf_job(environ):
    """True when an LSF job started this process (Horovod's test: LSB_JOBID is set)."""
    return "LSB_JOBID" in environ


def _count_in_order(names):
    counts = collections.OrderedDict()
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return list(counts.items())


def _read_hostfile(path):
    try:
        with open(path) as f:
            return f.read().split()
    except OSError:
        return []


def job_hosts(environ):
    """[(host, slots)] of the LSF job, in LSF's order; [] outside a job or if LSF gave
    no host list. A malformed LSB_MCPU_HOSTS raises ValueError naming it."""
    if not in_lsf_job(environ):
        return []
    mcpu = environ.get("LSB_MCPU_HOSTS", "").split()
    if mcpu:
        if len(mcpu) % 2:
            raise ValueError("LSB_MCPU_HOSTS=%r: expected 'host slots' pairs"
                             % environ["LSB_MCPU_HOSTS"])
        pairs = []
        for host, slots in zip(mcpu[::2], mcpu[1::2]):
            if not slots.isdigit() or int(slots) < 1:
                raise ValueError("LSB_MCPU_HOSTS=%r: %r is not a slot count"
                                 % (environ["LSB_MCPU_HOSTS"], slots))
            pairs.append((host, int(slots)))
        return pairs
    names = environ.get("LSB_HOSTS", "").split()
    if not names and environ.get("LSB_DJOB_HOSTFILE"):
        names = _read_hostfile(environ["LSB_DJOB_HOSTFILE"])
    return _count_in_order(names)
