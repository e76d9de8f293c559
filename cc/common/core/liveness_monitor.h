// Liveness apart from progress: each rank's core proves to every peer that it
// is alive, once per proof period, with a 32-byte UDP datagram sent from a
// thread of its own, and declares a peer lost when no proof came from it for
// HOROVOD_PEER_TIMEOUT_SECONDS, or when it says it has heard none of this
// rank's proofs for as long or declared this rank lost (the network drops one
// way: the side that still hears acts at the same bound). A stopped process (SIGSTOP, a frozen VM, a
// node swapped out) sends nothing and a partition drops the datagrams, while a
// rank whose Python is busy for minutes (a checkpoint, an evaluation) still
// proves it is alive, so slow is never taken for lost.
//
// Why a side channel and not the transport's links: the links belong to the
// background thread, which may sit in one long collective for as long as a
// slow peer takes; MPI's and NCCL's channels carry no out-of-band bytes; and
// one datagram per peer per period costs the same whatever carries the
// collectives (Gloo, MPI, NCCL), on one host or across hosts. UDP rather than
// a TCP connection per pair: no connection state to set up or tear down, and a
// lost datagram is simply a missing proof (TCP would retry it for minutes).
//
//   LivenessMonitor::Config c{rank, size, hosts, params, /*timeout_s=*/20};
//   std::unique_ptr<LivenessMonitor> monitor;
//   Status s = LivenessMonitor::Start(transport, c, on_lost, &monitor);  // every rank
//   ...                                    // on_lost(rank, message) from the monitor's thread
//   monitor->Stop();                       // tells the peers this rank leaves (not lost)
//
// A monitor whose own thread did not run for a while (this process was stopped)
// forgives its peers' silence meanwhile; a rank whose core stops on an error
// falls silent without a farewell, so a peer still waiting on it is not misled.
#ifndef TFHVD_COMMON_CORE_LIVENESS_MONITOR_H_
#define TFHVD_COMMON_CORE_LIVENESS_MONITOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cc/common/parameters.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

class LivenessMonitor {
 public:
  struct Config {
    int rank = 0, size = 1;
    std::vector<std::string> hosts;  // every rank's host, as the fault reports name them
    Parameters params;               // where this rank can be reached (HOROVOD_HOSTNAME, ...)
    double timeout_s = kDefaultPeerTimeoutS;
    double period_s = kLivenessProofPeriodS;
  };
  // Called once, from the monitor's thread, with the rank declared lost and
  // the message that names it.
  using OnLost = std::function<void(int rank, const std::string& message)>;

  // Collective (every rank calls it, on the background thread, in the same
  // order as the other negotiation calls): opens this rank's socket, exchanges
  // the addresses over the transport and starts the thread.
  static Status Start(Transport* transport, Config config, OnLost on_lost,
                      std::unique_ptr<LivenessMonitor>* out);
  ~LivenessMonitor();
  // Ends the thread; `announce`: first tells every peer this rank leaves, so
  // that none declares it lost (false: it falls silent, as a frozen rank).
  void Stop(bool announce = true);

 private:
  LivenessMonitor() = default;
  void Run();
  void SendProofs(uint8_t kind);
  void Receive(double now);
  // Declares the peer silent the longest, once past the bound.
  void CheckPeers(double now);
  std::string Describe(int rank, double silent_s) const;
  std::string Who(int rank) const;  // "rank 2 (on node1)"

  Config config_;
  OnLost on_lost_;
  int fd_ = -1;
  uint64_t nonce_ = 0;  // this job's init: datagrams of another job or init are ignored
  uint64_t seq_ = 0;
  // Per rank: where to send (every candidate address until one proof came back
  // from it, then the address it came from), when it last proved alive, whether
  // it said it leaves.
  std::vector<std::vector<std::string>> targets_;
  std::vector<int> ports_;
  std::vector<double> last_heard_;
  std::vector<bool> departed_;
  std::vector<double> deaf_;  // per rank: how long it says it has not heard from this one
  bool declared_ = false;
  int lost_ = -1;  // the rank declared lost (sent to the peers with every proof)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_LIVENESS_MONITOR_H_
