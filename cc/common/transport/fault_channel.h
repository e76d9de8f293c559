// Where a rank tells the launcher why its core stopped, and reads what a peer
// told it: the launcher-facing role that used to sit on Transport. A backend
// implements links and lifecycle (transport.h); a launcher integration
// implements this (gloo/rendezvous_fault_channel.h: the rendezvous store of
// tfhvdrun; core/fault_reporter.h: the file tfhvdrun --mpi names).
#ifndef TFHVD_COMMON_TRANSPORT_FAULT_CHANNEL_H_
#define TFHVD_COMMON_TRANSPORT_FAULT_CHANNEL_H_

#include <string>

namespace tfhvd {

class FaultChannel {
 public:
  virtual ~FaultChannel() = default;
  // Publishes this rank's report (core/fault_record.h's text). Best effort,
  // bounded in time: the launcher may already be tearing the job down.
  virtual void Publish(const std::string& text) = 0;
  // What `rank` published, if it did within a moment.
  virtual bool Read(int rank, std::string* text) {
    (void)rank;
    (void)text;
    return false;
  }
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_TRANSPORT_FAULT_CHANNEL_H_
