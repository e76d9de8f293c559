"""The launcher's processes: starting ranks (locally, over ssh, by srun, or one mpiexec),
polling, signalling and stopping them, their output and signals, and what they left
running. Nothing here decides what happens next (runner/agent/ does).

rank_group (a process per rank) and mpiexec_group (one mpiexec for every rank), the
events they report (events), failures (which rank failed first and why, from the
cores' fault records of tf_hvd.job.fault_record and each rank's exit; silent_ranks is
tf_hvd.job's), output (rank-prefixed lines; the launcher's own lines), signals, reaper
(ending a job's leftovers), ssh (command lines for remote ranks), and three scripts run
by path without the package: ssh_rank.py and remote_rank.py (either end of an ssh rank)
and rank_wrapper.py (each rank under mpiexec or jsrun), which load the stdlib-only
helpers of tf_hvd/job they share by path (job_files).

    from tf_hvd.runner.processes.rank_group import RankGroup
"""
