"""The launcher's processes: starting ranks (locally, over ssh), supervising them, their
output and signals, and what they left running.

supervisor (start, watch, stop the ranks; the launcher's own lines), failures (which
rank failed first and why), output (rank-prefixed lines), signals, reaper (ending a
job's leftovers), ssh (command lines for remote ranks), and three scripts run by path
without the package: ssh_rank.py and remote_rank.py (either end of an ssh rank) and
rank_wrapper.py (each rank under mpiexec or jsrun).

    from tf_hvd.runner.processes.supervisor import Supervisor, log_line
"""
