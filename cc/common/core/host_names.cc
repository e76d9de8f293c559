#include "cc/common/core/host_names.h"

#include <unistd.h>  // gethostname

namespace tfhvd {

std::string ThisHost(const Parameters& params) {
  if (!params.slot_hostname.empty()) return params.slot_hostname;
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "unknown host";
  return name;
}

Status ExchangeHosts(Transport* transport, const std::string& mine,
                     std::vector<std::string>* hosts) {
  std::vector<std::string> all;
  Status s = transport->GatherBytes(mine, &all);
  if (!s.ok()) return s;
  std::string joined;
  for (size_t r = 0; r < all.size(); ++r) joined += (r ? "\n" : "") + all[r];
  s = transport->BroadcastBytes(&joined, 0);
  if (!s.ok()) return s;
  hosts->clear();
  size_t start = 0;
  for (;;) {
    size_t nl = joined.find('\n', start);
    hosts->push_back(joined.substr(start, nl == std::string::npos ? nl : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return Status();
}

}  // namespace tfhvd
