#include "cc/common/host/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cctype>
#include <cstring>
#include <sstream>
#include <vector>

namespace tfhvd {

namespace {
Status Bad(const std::string& spec, const std::string& why) {
  return Status::InvalidArgument("HOROVOD_THREAD_AFFINITY='" + spec + "' is not a valid value: " +
                                 why);
}
}  // namespace

Status ThreadAffinityCpu(const std::string& spec, int local_rank, int local_size, int* cpu) {
  *cpu = -1;
  std::vector<int> ids;
  std::stringstream in(spec);
  std::string item;
  if (spec.find_first_not_of(" \t") == std::string::npos) return Status();  // blank: unpinned
  while (std::getline(in, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.empty() || item.size() > 6) return Bad(spec, "expected CPU ids (0, 1, ...)");
    for (char c : item) {
      if (!std::isdigit(static_cast<unsigned char>(c))) {
        return Bad(spec, "expected comma-separated CPU ids, got '" + item + "'");
      }
    }
    ids.push_back(std::stoi(item));
  }
  if (ids.empty()) return Status();
  if (ids.size() == 1) {
    *cpu = ids[0] + local_rank;
  } else if (static_cast<int>(ids.size()) == local_size) {
    *cpu = ids[static_cast<size_t>(local_rank)];
  } else {
    return Bad(spec, "expected one CPU id per local rank (" + std::to_string(local_size) +
                         "), or a single id, got " + std::to_string(ids.size()));
  }
  if (*cpu >= CPU_SETSIZE) return Bad(spec, "CPU " + std::to_string(*cpu) + " is out of range");
  return Status();
}

Status PinThisThread(int cpu) {
  if (cpu < 0) return Status();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0) {
    return Status::InvalidArgument("HOROVOD_THREAD_AFFINITY: cannot pin the background thread "
                                   "to CPU " + std::to_string(cpu) + ": " + std::strerror(rc) +
                                   " (this process may not use that CPU)");
  }
  return Status();
}

int PinnedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return -1;
  if (CPU_COUNT(&set) != 1) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return -1;
}

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return 1;
  return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
}

}  // namespace tfhvd
