// The MPI functions tf_hvd's MPI backend calls, each defined in mpi_symbols.cc to call
// the same function of the library MpiLibrary loaded (mpi_library.h): the
// backend keeps calling MPI_Isend(...) as written, and _hvd.so has no link-time
// dependency on libmpi. A new MPI call in the backend needs its row below
// (tools/release/check_wheels.py --library, run by tests/unit/test_library_links.py, finds
// a missing one).
#ifndef TFHVD_COMMON_MPI_MPI_SYMBOLS_H_
#define TFHVD_COMMON_MPI_MPI_SYMBOLS_H_

#include <mpi.h>

#include <vector>

// X(name, (parameters), (arguments)) for every MPI function the backend calls.
#define TFHVD_MPI_FUNCTIONS(X) \
  X(MPI_Allreduce, (const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op \
      op, MPI_Comm comm), (sendbuf, recvbuf, count, datatype, op, comm)) \
  X(MPI_Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm), (comm, \
      group, tag, newcomm)) \
  X(MPI_Comm_dup, (MPI_Comm comm, MPI_Comm* newcomm), (comm, newcomm)) \
  X(MPI_Comm_free, (MPI_Comm* comm), (comm)) \
  X(MPI_Comm_group, (MPI_Comm comm, MPI_Group* group), (comm, group)) \
  X(MPI_Comm_rank, (MPI_Comm comm, int* rank), (comm, rank)) \
  X(MPI_Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler errhandler), (comm, errhandler)) \
  X(MPI_Comm_size, (MPI_Comm comm, int* size), (comm, size)) \
  X(MPI_Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm* newcomm), (comm, color, key, \
      newcomm)) \
  X(MPI_Comm_split_type, (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* \
      newcomm), (comm, split_type, key, info, newcomm)) \
  X(MPI_Error_string, (int errorcode, char* string, int* resultlen), (errorcode, string, \
      resultlen)) \
  X(MPI_Finalize, (void), ()) \
  X(MPI_Finalized, (int* flag), (flag)) \
  X(MPI_Group_free, (MPI_Group* group), (group)) \
  X(MPI_Group_incl, (MPI_Group group, int n, const int ranks[], MPI_Group* newgroup), (group, n, \
      ranks, newgroup)) \
  X(MPI_Iallgatherv, (const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, \
      const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, \
      MPI_Request* request), (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, \
      recvtype, comm, request)) \
  X(MPI_Iallreduce, (const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, \
      MPI_Op op, MPI_Comm comm, MPI_Request* request), (sendbuf, recvbuf, count, datatype, op, \
      comm, request)) \
  X(MPI_Ialltoallv, (const void* sendbuf, const int sendcounts[], const int sdispls[], \
      MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[], \
      MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request), (sendbuf, sendcounts, \
      sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, request)) \
  X(MPI_Ibarrier, (MPI_Comm comm, MPI_Request* request), (comm, request)) \
  X(MPI_Ibcast, (void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, \
      MPI_Request* request), (buffer, count, datatype, root, comm, request)) \
  X(MPI_Igather, (const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int \
      recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request), \
      (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request)) \
  X(MPI_Igatherv, (const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, \
      const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm \
      comm, MPI_Request* request), (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, \
      recvtype, root, comm, request)) \
  X(MPI_Init_thread, (int* argc, char*** argv, int required, int* provided), (argc, argv, \
      required, provided)) \
  X(MPI_Initialized, (int* flag), (flag)) \
  X(MPI_Irecv, (void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, \
      MPI_Request* request), (buf, count, datatype, source, tag, comm, request)) \
  X(MPI_Isend, (const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm \
      comm, MPI_Request* request), (buf, count, datatype, dest, tag, comm, request)) \
  X(MPI_Op_create, (MPI_User_function* user_fn, int commute, MPI_Op* op), (user_fn, commute, \
      op)) \
  X(MPI_Op_free, (MPI_Op* op), (op)) \
  X(MPI_Query_thread, (int* provided), (provided)) \
  X(MPI_Testall, (int count, MPI_Request array_of_requests[], int* flag, MPI_Status* \
      array_of_statuses), (count, array_of_requests, flag, array_of_statuses)) \
  X(MPI_Type_commit, (MPI_Datatype* datatype), (datatype)) \
  X(MPI_Type_contiguous, (int count, MPI_Datatype oldtype, MPI_Datatype* newtype), (count, \
      oldtype, newtype)) \
  X(MPI_Type_free, (MPI_Datatype* datatype), (datatype))

namespace tfhvd {

// The names above, which a library must all have to be accepted.
const std::vector<const char*>& MpiFunctionNames();

}  // namespace tfhvd

#endif  // TFHVD_COMMON_MPI_MPI_SYMBOLS_H_
