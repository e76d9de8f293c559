#include "cc/common/host/cpu_binding.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "cc/common/logging.h"

namespace tfhvd {

namespace {

double SecondsNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool ReadFile(const char* path, std::string* text) {
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  text->clear();
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text->append(buf, n);
  std::fclose(f);
  return !text->empty();
}

std::string CpuList(const std::vector<int>& cpus) {
  std::string out;
  for (int c : cpus) out += (out.empty() ? "" : ",") + std::to_string(c);
  return out;
}

}  // namespace

BindingPolicy::Action BindingPolicy::Observe(double now_s, double foreign_share) {
  if (base_retry_s_ <= 0) return Action::KEEP;
  if (!bound_) {
    if (now_s - released_at_s_ < retry_s_) return Action::KEEP;
    bound_ = true;
    trial_ = true;
    busy_windows_ = 0;
    return Action::REBIND;
  }
  if (foreign_share < kBusyShare) {
    busy_windows_ = 0;
    if (trial_) retry_s_ = base_retry_s_;  // the contention is over
    trial_ = false;
    return Action::KEEP;
  }
  if (++busy_windows_ < kBusyWindows) return Action::KEEP;
  if (trial_) retry_s_ = std::min(retry_s_ * 2, base_retry_s_ * kMaxRetryFactor);
  trial_ = false;
  bound_ = false;
  busy_windows_ = 0;
  ++releases_;
  released_at_s_ = now_s;
  return Action::RELEASE;
}

bool ParseCpuTicks(const std::string& proc_stat, const std::vector<int>& cpus, uint64_t* busy,
                   uint64_t* total) {
  *busy = *total = 0;
  for (int cpu : cpus) {
    const std::string key = "\ncpu" + std::to_string(cpu) + " ";
    size_t at = proc_stat.find(key);
    if (at == std::string::npos) return false;
    std::istringstream line(proc_stat.substr(at + key.size(), proc_stat.find('\n', at + 1) - at));
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest
    // time is already counted in user.
    uint64_t v[8];
    for (int i = 0; i < 8; ++i) {
      if (!(line >> v[i])) return false;
    }
    *busy += v[0] + v[1] + v[2];
    for (uint64_t x : v) *total += x;
  }
  return true;
}

bool ParseProcessTicks(const std::string& proc_pid_stat, uint64_t* ticks) {
  // "pid (comm) state ppid ..." : comm may hold spaces and parentheses, so
  // count fields after the last ')'. utime and stime are fields 14 and 15.
  size_t close = proc_pid_stat.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(proc_pid_stat.substr(close + 1));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15; ++i) {
    if (!(rest >> field)) return false;
    char* end = nullptr;
    if (i == 14) utime = std::strtoull(field.c_str(), &end, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), &end, 10);
    if ((i == 14 || i == 15) && *end != '\0') return false;
  }
  *ticks = utime + stime;
  return true;
}

bool ForeignShareMeter::Sample(const std::vector<int>& cpus, double* share) {
  std::string stat, self;
  if (!ReadFile("/proc/stat", &stat) || !ReadFile("/proc/self/stat", &self)) {
    have_ = false;
    return false;
  }
  return Update(stat, self, cpus, share);
}

bool ForeignShareMeter::Update(const std::string& proc_stat, const std::string& proc_self_stat,
                               const std::vector<int>& cpus, double* share) {
  uint64_t busy, total, mine;
  if (!ParseCpuTicks(proc_stat, cpus, &busy, &total) ||
      !ParseProcessTicks(proc_self_stat, &mine)) {
    have_ = false;
    return false;
  }
  const bool had = have_ && total > total_;
  if (had) {
    // The process's time is precise, the CPUs' is sampled per tick: clamp.
    const double foreign = static_cast<double>(busy - busy_) - static_cast<double>(mine - self_);
    *share = std::max(0.0, foreign / static_cast<double>(total - total_));
  }
  busy_ = busy;
  total_ = total;
  self_ = mine;
  have_ = true;
  return had;
}

Status SetProcessAffinity(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  // Twice: a thread started during the first pass by a thread not yet moved
  // inherits the old mask.
  for (int pass = 0; pass < 2; ++pass) {
    DIR* dir = opendir("/proc/self/task");
    if (!dir) return Status::Unknown(std::string("cannot list /proc/self/task: ") +
                                     std::strerror(errno));
    while (struct dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
      if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH) {
        const int err = errno;
        closedir(dir);
        return Status::InvalidArgument("cannot bind thread " + std::to_string(tid) +
                                       " to CPUs " + CpuList(cpus) + ": " +
                                       std::strerror(err));
      }
    }
    closedir(dir);
  }
  return Status();
}

Status CpuBinding::Bind(const std::vector<int>& bound, const std::vector<int>& wide,
                        double retry_s) {
  std::lock_guard<std::mutex> lock(mu_);
  Status s = SetProcessAffinity(bound);
  if (!s.ok()) return s;
  bound_ = bound;
  wide_ = wide;
  const bool can_release = retry_s > 0 && wide != bound;
  policy_ = BindingPolicy(can_release ? retry_s : 0);
  meter_.Reset();
  double unused;
  meter_.Sample(bound_, &unused);
  next_window_s_.store(SecondsNow() + 1.0);
  active_.store(can_release);
  return Status();
}

void CpuBinding::Tick() {
  if (!active_.load(std::memory_order_relaxed)) return;
  const double now = SecondsNow();
  if (now < next_window_s_.load(std::memory_order_relaxed)) return;
  next_window_s_.store(now + 1.0, std::memory_order_relaxed);
  Window(now);
}

void CpuBinding::Window(double now_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_.load()) return;
  double share = 0;
  if (policy_.bound() && !meter_.Sample(bound_, &share)) return;
  switch (policy_.Observe(now_s, share)) {
    case BindingPolicy::Action::RELEASE: {
      Status s = SetProcessAffinity(wide_);
      TFHVD_LOG(INFO) << "other processes use " << static_cast<int>(share * 100)
                      << "% of this rank's CPUs " << CpuList(bound_) << ": running on CPUs "
                      << CpuList(wide_) << " for " << policy_.retry_s() << " s"
                      << (s.ok() ? "" : " failed: " + s.message());
      break;
    }
    case BindingPolicy::Action::REBIND: {
      Status s = SetProcessAffinity(bound_);
      meter_.Reset();
      double unused;
      meter_.Sample(bound_, &unused);
      TFHVD_LOG(INFO) << "bound to CPUs " << CpuList(bound_) << " again"
                      << (s.ok() ? "" : " failed: " + s.message());
      break;
    }
    case BindingPolicy::Action::KEEP:
      break;
  }
}

CpuBinding::State CpuBinding::state() {
  std::lock_guard<std::mutex> lock(mu_);
  State st;
  st.active = active_.load();
  st.bound = policy_.bound();
  st.releases = policy_.releases();
  st.cpus = bound_.empty() || policy_.bound() ? bound_ : wide_;
  return st;
}

CpuBinding& GlobalCpuBinding() {
  static CpuBinding* binding = new CpuBinding();  // outlives every thread that ticks it
  return *binding;
}

}  // namespace tfhvd
