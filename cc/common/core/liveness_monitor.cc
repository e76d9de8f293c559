#include "cc/common/core/liveness_monitor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "cc/common/logging.h"

namespace tfhvd {

namespace {

constexpr char kMagic[4] = {'T', 'H', 'V', 'L'};
constexpr uint8_t kProof = 1;
constexpr uint8_t kLeaving = 2;
// A proof that also says which rank the sender declared lost (in `seq`): a rank that
// hears nothing from this one tells it so, and this one, which still hears it, then knows
// the network drops what it sends there (one-way loss) at once, not a bound later.
constexpr uint8_t kVerdict = 3;

// One datagram: who sends it to whom, for which job, and what it says.
struct Datagram {
  char magic[4];
  uint8_t kind;
  uint8_t unused;
  // Tenths of a second since the sender last heard from the receiver (network byte
  // order, capped): what tells the receiver its own proofs no longer arrive (one-way loss).
  uint16_t deaf_ds;
  uint32_t from, to;  // network byte order
  uint64_t nonce;     // as rank 0 drew it (compared byte for byte)
  uint64_t seq;
};
static_assert(sizeof(Datagram) == 32, "one small datagram");

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool IsLoopback(const std::string& address) { return address.rfind("127.", 0) == 0; }

bool IsIpv4(const std::string& text) {
  in_addr a;
  return inet_pton(AF_INET, text.c_str(), &a) == 1;
}

// Where peers on other hosts may reach this rank: the address it already
// publishes for Gloo (its interface's or HOROVOD_HOSTNAME, when numeric), then
// every other IPv4 address of the host. A peer sends to each until a proof
// comes back from one, then only there.
std::vector<std::string> OwnAddresses(const Parameters& params) {
  std::vector<std::string> out;
  ifaddrs* all = nullptr;
  std::vector<std::string> others;
  if (getifaddrs(&all) == 0) {
    for (ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
      char text[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
      if (IsLoopback(text)) continue;
      if (!params.gloo_iface.empty() && params.gloo_iface == a->ifa_name) {
        out.push_back(text);
      } else {
        others.push_back(text);
      }
    }
    freeifaddrs(all);
  }
  if (out.empty() && IsIpv4(params.hostname) && !IsLoopback(params.hostname)) {
    out.push_back(params.hostname);
  }
  for (const auto& a : others) {
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

// Every rank's "port addr,addr,..." on every rank, with rank 0's nonce first:
// the same gather-then-broadcast as the host names (core/host_names.h).
Status ExchangeAddresses(Transport* transport, int rank, const std::string& mine,
                         uint64_t* nonce, std::vector<std::string>* all) {
  std::vector<std::string> gathered;
  Status s = transport->GatherBytes(mine, &gathered);
  if (!s.ok()) return s;
  std::string joined;
  if (rank == 0) {
    std::random_device random;
    uint64_t drawn = (static_cast<uint64_t>(random()) << 32) ^ random();
    joined = std::to_string(drawn);
    for (const auto& g : gathered) joined += "\n" + g;
  }
  s = transport->BroadcastBytes(&joined, 0);
  if (!s.ok()) return s;
  std::vector<std::string> lines = Split(joined, '\n');
  if (lines.empty()) return Status::Unknown("liveness: empty address exchange");
  *nonce = std::stoull(lines[0]);
  all->assign(lines.begin() + 1, lines.end());
  return Status();
}

std::string Seconds(double s) {
  std::ostringstream text;
  text << s;
  return text.str();
}

}  // namespace

Status LivenessMonitor::Start(Transport* transport, Config config, OnLost on_lost,
                              std::unique_ptr<LivenessMonitor>* out) {
  std::unique_ptr<LivenessMonitor> m(new LivenessMonitor());
  m->config_ = std::move(config);
  m->on_lost_ = std::move(on_lost);
  const int size = m->config_.size, me = m->config_.rank;
  // The socket first, so that its port can be published; a rank that cannot
  // open one still takes part in the exchange (port 0: nobody sends to it).
  int port = 0;
  m->fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (m->fd_ >= 0) {
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof(any);
    if (bind(m->fd_, reinterpret_cast<sockaddr*>(&any), sizeof(any)) == 0 &&
        getsockname(m->fd_, reinterpret_cast<sockaddr*>(&any), &len) == 0) {
      port = ntohs(any.sin_port);
    }
  }
  if (port == 0) {
    TFHVD_LOG(WARNING) << "liveness: cannot open a UDP socket (" << std::strerror(errno)
                       << "); the other ranks will not tell this one frozen from slow";
  }
  std::string mine = std::to_string(port) + " ";
  const std::vector<std::string> addresses = OwnAddresses(m->config_.params);
  for (size_t i = 0; i < addresses.size(); ++i) mine += (i ? "," : "") + addresses[i];
  std::vector<std::string> all;
  Status s = ExchangeAddresses(transport, me, mine, &m->nonce_, &all);
  if (!s.ok()) return s;
  if (static_cast<int>(all.size()) != size) {
    return Status::Unknown("liveness: " + std::to_string(all.size()) + " addresses for " +
                           std::to_string(size) + " ranks");
  }
  m->targets_.resize(static_cast<size_t>(size));
  m->ports_.assign(static_cast<size_t>(size), 0);
  const auto& hosts = m->config_.hosts;
  for (int r = 0; r < size; ++r) {
    const std::vector<std::string> fields = Split(all[static_cast<size_t>(r)], ' ');
    m->ports_[static_cast<size_t>(r)] = fields.empty() ? 0 : std::atoi(fields[0].c_str());
    auto& targets = m->targets_[static_cast<size_t>(r)];
    const bool same_host = static_cast<size_t>(r) < hosts.size() &&
                           static_cast<size_t>(me) < hosts.size() &&
                           hosts[static_cast<size_t>(r)] == hosts[static_cast<size_t>(me)];
    if (same_host) targets.push_back("127.0.0.1");
    if (fields.size() > 1) {
      for (const auto& a : Split(fields[1], ',')) {
        if (!a.empty() && IsIpv4(a)) targets.push_back(a);
      }
    }
    if (targets.empty()) targets.push_back("127.0.0.1");  // a host with loopback only
  }
  const double now = Now();
  m->last_heard_.assign(static_cast<size_t>(size), now);
  m->departed_.assign(static_cast<size_t>(size), false);
  m->deaf_.assign(static_cast<size_t>(size), 0);
  if (m->fd_ >= 0 && port != 0) m->thread_ = std::thread(&LivenessMonitor::Run, m.get());
  *out = std::move(m);
  return Status();
}

LivenessMonitor::~LivenessMonitor() {
  Stop();
  if (fd_ >= 0) close(fd_);
}

void LivenessMonitor::Stop(bool announce) {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) {
    thread_.join();
    if (announce) SendProofs(kLeaving);
  }
}

void LivenessMonitor::SendProofs(uint8_t kind) {
  Datagram d{};
  std::memcpy(d.magic, kMagic, sizeof(kMagic));
  d.kind = kind;
  d.from = htonl(static_cast<uint32_t>(config_.rank));
  d.nonce = nonce_;
  d.seq = kind == kVerdict ? static_cast<uint64_t>(lost_) : ++seq_;
  for (int r = 0; r < config_.size; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (r == config_.rank || ports_[i] == 0 || departed_[i]) continue;
    d.to = htonl(static_cast<uint32_t>(r));
    const double deaf_ds = std::min(65535.0, std::max(0.0, 10 * (Now() - last_heard_[i])));
    d.deaf_ds = htons(static_cast<uint16_t>(deaf_ds));
    for (const auto& address : targets_[i]) {
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(static_cast<uint16_t>(ports_[i]));
      inet_pton(AF_INET, address.c_str(), &to.sin_addr);
      // Best effort: a full buffer or an unreachable network is a missing proof.
      (void)sendto(fd_, &d, sizeof(d), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&to),
                   sizeof(to));
    }
  }
}

void LivenessMonitor::Receive(double now) {
  for (;;) {
    Datagram d;
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    ssize_t n = recvfrom(fd_, &d, sizeof(d), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from),
                         &len);
    if (n < 0) return;  // EAGAIN: nothing more now
    if (n != static_cast<ssize_t>(sizeof(d)) || std::memcmp(d.magic, kMagic, 4) != 0 ||
        d.nonce != nonce_ || ntohl(d.to) != static_cast<uint32_t>(config_.rank)) {
      continue;  // another job's, or an earlier init's
    }
    const uint32_t peer = ntohl(d.from);
    if (peer >= static_cast<uint32_t>(config_.size)) continue;
    last_heard_[peer] = now;
    deaf_[peer] = 0.1 * ntohs(d.deaf_ds);
    if (d.kind == kLeaving) departed_[peer] = true;
    if (d.kind == kVerdict && d.seq == static_cast<uint64_t>(config_.rank)) deaf_[peer] = 1e9;
    // Answer only where proofs come from: that address reaches it.
    char text[INET_ADDRSTRLEN] = {0};
    inet_ntop(AF_INET, &from.sin_addr, text, sizeof(text));
    auto& targets = targets_[peer];
    if (targets.size() != 1 || targets[0] != text) targets.assign(1, text);
  }
}

std::string LivenessMonitor::Who(int rank) const {
  std::string who = "rank " + std::to_string(rank);
  if (static_cast<size_t>(rank) < config_.hosts.size()) {
    who += " (on " + config_.hosts[static_cast<size_t>(rank)] + ")";
  }
  return who;
}

std::string LivenessMonitor::Describe(int rank, double silent_s) const {
  std::string text = Who(rank) + " stopped answering: its core sent no liveness proof for " +
                     Seconds(std::floor(silent_s)) +
                     " s (HOROVOD_PEER_TIMEOUT_SECONDS=" + Seconds(config_.timeout_s) +
                     "); its process is frozen (stopped, hung or swapped out) or its host is "
                     "cut off from this one";
  int silent = 0, peers = 0;
  const double now = Now();
  for (int r = 0; r < config_.size; ++r) {
    if (r == config_.rank || departed_[static_cast<size_t>(r)]) continue;
    ++peers;
    // Half the bound, not all of it: when this host is the one cut off, every peer's last
    // proof arrived at about the same time, but the threads that sent them (and the
    // checks here) may run late on a loaded host, so the others need not all have crossed
    // the bound at the check that crosses it first.
    if (now - last_heard_[static_cast<size_t>(r)] > config_.timeout_s / 2) ++silent;
  }
  if (peers > 1 && silent == peers) {
    text += "; no other rank's proofs arrive either: this rank's host may be the one cut off";
  }
  return text;
}

void LivenessMonitor::CheckPeers(double now) {
  if (declared_) return;
  int worst = -1;
  double worst_silent = config_.timeout_s;
  for (int r = 0; r < config_.size; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (r == config_.rank || departed_[i] || ports_[i] == 0) continue;
    const double silent = now - last_heard_[i];
    if (silent > worst_silent) {
      worst = r;
      worst_silent = silent;
    }
  }
  std::string message;
  if (worst >= 0) {
    message = Describe(worst, worst_silent);
  } else {
    // Its proofs arrive but it hears none of this rank's: the network drops what goes
    // from here to there. That rank is as cut off from the job as a silent one.
    for (int r = 0; r < config_.size && worst < 0; ++r) {
      const size_t i = static_cast<size_t>(r);
      if (r == config_.rank || departed_[i] || ports_[i] == 0) continue;
      // Half a period early: that rank declares this one silent at the bound and then
      // falls silent itself; its last proofs must already count here.
      if (deaf_[i] > config_.timeout_s - config_.period_s / 2) worst = r;
    }
    if (worst < 0) return;
    message = Who(worst) + " stopped answering: it has received no liveness proof from this "
              "rank for " + Seconds(config_.timeout_s) +
              " s (HOROVOD_PEER_TIMEOUT_SECONDS) although its own arrive: the network drops "
              "what goes from this host to its host (one-way loss)";
  }
  declared_ = true;
  lost_ = worst;
  TFHVD_LOG(ERROR) << message;
  SendProofs(kVerdict);  // and with every proof from now on
  if (on_lost_) on_lost_(worst, message);
}

void LivenessMonitor::Run() {
  const double period = config_.period_s;
  double next_proof = Now();
  double last_turn = next_proof;
  while (!stop_.load()) {
    double now = Now();
    // This thread did not run for a while (this process was stopped, or the
    // host starved it): the peers' silence meanwhile says nothing about them.
    if (now - last_turn > std::max(2 * period, config_.timeout_s / 2)) {
      for (double& t : last_heard_) t = now;
    }
    last_turn = now;
    if (now >= next_proof) {
      SendProofs(declared_ ? kVerdict : kProof);
      next_proof = std::max(next_proof + period, now);
    }
    Receive(now);
    CheckPeers(now);
    // Waits for the next datagram, the next proof, or a look at the stop flag.
    const double wait = std::min(next_proof - Now(), 0.2);
    pollfd p{fd_, POLLIN, 0};
    ::poll(&p, 1, std::max(0, static_cast<int>(wait * 1000)));
  }
}

}  // namespace tfhvd
