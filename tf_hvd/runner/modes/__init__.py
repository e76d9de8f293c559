"""How a plan's ranks are started: Gloo (gloo_run: this process serves the rendezvous and
starts every rank), MPI (mpi_run, with mpiexec's command line in mpiexec), jsrun in an
LSF job (js_run, lsf), inside a Slurm allocation (slurm: srun instead of ssh), in an MPI
Operator's launcher pod (mpi_operator). A run returns one RunOutcome (outcome).

    from tf_hvd.runner.modes import gloo_run
    exit_code = gloo_run.run(plan)
"""
