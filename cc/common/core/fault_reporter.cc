#include "cc/common/core/fault_reporter.h"

#include <cstdio>

#include <atomic>

#include <unistd.h>  // getpid

#include "cc/common/transport/peer_loss.h"

namespace tfhvd {

FaultReporter::FaultReporter(int rank, std::vector<std::string> hosts,
                             std::vector<std::unique_ptr<FaultChannel>> channels)
    : rank_(rank), hosts_(std::move(hosts)), channels_(std::move(channels)) {}

std::string FaultReporter::RankAt(int rank) const {
  std::string text = "rank " + std::to_string(rank);
  if (rank >= 0 && static_cast<size_t>(rank) < hosts_.size()) {
    text += " (on " + hosts_[static_cast<size_t>(rank)] + ")";
  }
  return text;
}

void FaultReporter::Publish(const FaultRecord& record) {
  const std::string text = record.Text();
  for (auto& channel : channels_) channel->Publish(text);
}

// A link error names the peer rank: say where it runs, and if that rank had
// itself stopped because of another one, name that one (its report says so).
Status FaultReporter::Failed(const Status& error) {
  Status s = error;
  FaultRecord mine;
  mine.kind = s.message().rfind("stall shutdown", 0) == 0 ? "stall" : "error";
  const int peer = s.peer();
  if (peer >= 0 && peer != rank_) {
    mine.kind = "lost";
    mine.culprit = peer;
    std::string text = s.message();
    // The liveness monitor's message names the rank already.
    if (PeerLost() && PeerLostError().peer() == peer && text == PeerLostError().message()) {
      mine.kind = "silent";
    } else {
      text += " (" + RankAt(peer) + ")";
    }
    std::string published;
    FaultRecord theirs;
    // A silent rank's own report, if any reached the launcher, is its view
    // from behind the fault (it may blame a healthy rank): not followed.
    for (auto& channel : channels_) {
      if (mine.kind == "silent") break;
      if (!channel->Read(peer, &published)) continue;
      if (FaultRecord::Parse(published, &theirs) && theirs.culprit >= 0 &&
          theirs.culprit != rank_) {
        mine.culprit = theirs.culprit;
        text = RankAt(theirs.culprit) + " failed first; " + RankAt(peer) +
               " stopped because: " + theirs.message + " [here: " + s.message() + "]";
      }
      break;
    }
    s = Status(s.code(), text).WithPeer(peer);
  }
  mine.message = s.message();
  Publish(mine);
  return s;
}

Status FaultReporter::LeftByOthers(const ResponseList& list) {
  std::string who;
  FaultRecord mine;
  for (int r : list.shutdown_called_by) {
    if (r == rank_) continue;
    who += (who.empty() ? "" : "; ") + RankAt(r) + " called hvd.shutdown()";
    if (mine.culprit < 0) { mine.culprit = r; mine.kind = "shutdown"; }
  }
  for (int r : list.exiting) {
    if (r == rank_) continue;
    who += (who.empty() ? "" : "; ") + RankAt(r) + " left the job (its process is exiting)";
    if (mine.culprit < 0) { mine.culprit = r; mine.kind = "exiting"; }
  }
  if (who.empty()) who = "another rank shut Horovod down";
  Status s = Status::Aborted(who + "; this collective did not run");
  mine.message = s.message();
  Publish(mine);
  return s;
}

void FaultFileChannel::Publish(const std::string& text) {
  if (path_.empty()) return;
  // Two threads may publish (the liveness monitor's and the background one).
  static std::atomic<int> count{0};
  const std::string tmp =
      path_ + ".tmp." + std::to_string(getpid()) + "." + std::to_string(count++);
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) == 0 && ok) {
    std::rename(tmp.c_str(), path_.c_str());
  } else {
    std::remove(tmp.c_str());
  }
}

}  // namespace tfhvd
