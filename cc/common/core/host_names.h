// Every rank's host (HOROVOD_SLOT_HOSTNAME, else its host name), exchanged at
// init so that errors can say where a rank runs.
//
//   std::vector<std::string> hosts;
//   ExchangeHosts(transport, ThisHost(params), &hosts);   // hosts[r]: rank r's host
#ifndef TFHVD_COMMON_CORE_HOST_NAMES_H_
#define TFHVD_COMMON_CORE_HOST_NAMES_H_

#include <string>
#include <vector>

#include "cc/common/parameters.h"
#include "cc/common/transport/transport.h"

namespace tfhvd {

std::string ThisHost(const Parameters& params);
// Collective: rank 0 gathers every rank's `mine`, joins them with newlines
// and broadcasts the list.
Status ExchangeHosts(Transport* transport, const std::string& mine,
                     std::vector<std::string>* hosts);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_HOST_NAMES_H_
