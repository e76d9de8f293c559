// Looks like Open MPI to the MPI loader (its communicator object is exported by that
// name), for runtime_library_test.
extern "C" {
int ompi_mpi_comm_world = 0;
}
