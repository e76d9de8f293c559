"""How a plan's ranks are started: Gloo (gloo_run: this process serves the rendezvous and
starts every rank: here, over ssh, or by srun inside a Slurm allocation), MPI (mpi_run,
with mpiexec's command line in mpiexec), jsrun in an LSF job (js_run). Where the hosts
come from in an LSF job, a Slurm allocation or an MPI Operator's launcher pod is the job
contract's (tf_hvd/job/lsf_hosts.py, slurm_allocation.py, mpi_operator_hostfile.py).
Each mode builds a rank group and a policy and hands them to the agent (runner/agent/);
every run returns one RunOutcome.

    from tf_hvd.runner.modes import gloo_run
    exit_code = gloo_run.run(plan).code
"""
