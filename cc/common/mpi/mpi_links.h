// Links between ranks over an MPI communicator: non-blocking sends and
// receives completed by a polite wait (spin, then nap) so a waiting rank does
// not busy-poll a core its peers need.
//
//   MpiLinks links(comm, params.spin_us);
//   Status s = links.Exchange(next, mine, n, prev, theirs, n);
#ifndef TFHVD_COMMON_MPI_MPI_LINKS_H_
#define TFHVD_COMMON_MPI_MPI_LINKS_H_

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <string>

#include "cc/common/transport/links.h"

namespace tfhvd {

// A Status for an MPI return code ("MPI <what> failed: <MPI's words>").
Status MpiCheck(int rc, const std::string& what);

// Completes n requests: retries for spin_us (yielding the core), then naps
// 50 us between tests (progress needs MPI_Test calls). Every MPI collective
// on the background thread's path waits here, never in MPI's own blocking
// wait, which busy-polls a core (MPICH's progress engine) that the peer rank
// or this rank's TensorFlow threads may need. Fails with
// DEADLINE_EXCEEDED after limit_s seconds (HOROVOD_STALL_SHUTDOWN_TIME_SECONDS;
// 0: waits forever), so a collective whose peer is stuck ends.
Status MpiWait(MPI_Request* requests, int n, int64_t spin_us, const std::string& what,
               double limit_s = 0);

class MpiLinks : public Links {
 public:
  MpiLinks() = default;
  void Reset(MPI_Comm comm, int rank, int size, int64_t spin_us, double limit_s) {
    comm_ = comm;
    rank_ = rank;
    size_ = size;
    spin_us_ = spin_us;
    limit_s_ = limit_s;
    posted_.clear();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Send(int to, const void* data, size_t bytes) override;
  Status Recv(int from, void* data, size_t bytes) override;
  Status Exchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                  size_t recv_bytes) override;
  // StartExchange posts the receive and the send (Irecv, Isend); FinishExchange
  // waits for the oldest. A transfer beyond one MPI count runs whole in
  // StartExchange. Exchange runs after the started exchanges.
  Status StartExchange(int to, const void* send, size_t send_bytes, int from, void* recv,
                       size_t recv_bytes) override;
  Status FinishExchange() override;

 private:
  // The requests of one posted piece (a receive and/or a send).
  struct Posted {
    MPI_Request requests[2];
    int n = 0, to = 0, from = 0;
    bool sending = false, receiving = false;
  };
  Status Post(int to, const char* send, size_t send_bytes, int from, char* recv,
              size_t recv_bytes, Posted* p);
  Status Complete(Posted* p);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double limit_s_ = 0;
  int64_t spin_us_ = 0;
  std::deque<Posted> posted_;  // started exchanges, oldest first
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_MPI_MPI_LINKS_H_
