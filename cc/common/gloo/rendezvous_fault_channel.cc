#include "cc/common/gloo/rendezvous_fault_channel.h"

#include <chrono>
#include <exception>
#include <vector>

#include "cc/common/gloo/http_store.h"
#include "cc/common/logging.h"

namespace tfhvd {

void RendezvousFaultChannel::Publish(const std::string& text) {
  if (params_.rendezvous_addr.empty() || params_.rendezvous_port <= 0) return;
  try {
    // A short bound: the launcher may already be tearing the job down.
    HttpStore store(params_.rendezvous_addr, static_cast<int>(params_.rendezvous_port), "tf_hvd",
                    std::chrono::seconds(2), params_.rendezvous_secret, size_);
    store.set("fault/" + std::to_string(rank_), std::vector<char>(text.begin(), text.end()));
  } catch (const std::exception& e) {
    TFHVD_LOG(DEBUG) << "could not report the fault to the launcher: " << e.what();
  }
}

bool RendezvousFaultChannel::Read(int rank, std::string* text) {
  if (params_.rendezvous_addr.empty() || params_.rendezvous_port <= 0) return false;
  try {
    // The peer reports before it closes its links, so a report that exists is
    // there by now; a rank that died reports nothing: do not wait long.
    HttpStore store(params_.rendezvous_addr, static_cast<int>(params_.rendezvous_port), "tf_hvd",
                    std::chrono::milliseconds(300), params_.rendezvous_secret, size_);
    std::vector<char> value = store.get("fault/" + std::to_string(rank));
    text->assign(value.begin(), value.end());
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace tfhvd
