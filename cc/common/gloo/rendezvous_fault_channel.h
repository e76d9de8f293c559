// Fault reports through tfhvdrun's rendezvous store (HOROVOD_GLOO_RENDEZVOUS_ADDR/
// PORT): this rank's record under "fault/<rank>", which the launcher and the
// other ranks read. Used with the Gloo transport (core/transport_factory.h).
#ifndef TFHVD_COMMON_GLOO_RENDEZVOUS_FAULT_CHANNEL_H_
#define TFHVD_COMMON_GLOO_RENDEZVOUS_FAULT_CHANNEL_H_

#include <string>

#include "cc/common/transport/fault_channel.h"
#include "cc/common/parameters.h"

namespace tfhvd {

class RendezvousFaultChannel : public FaultChannel {
 public:
  RendezvousFaultChannel(const Parameters& params, int rank, int size)
      : params_(params), rank_(rank), size_(size) {}
  void Publish(const std::string& text) override;
  bool Read(int rank, std::string* text) override;

 private:
  Parameters params_;
  int rank_, size_;
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_GLOO_RENDEZVOUS_FAULT_CHANNEL_H_
