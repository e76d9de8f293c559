#include "cc/common/timeline/timeline.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tfhvd {

namespace {
std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string Upper(const char* s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

Timeline& GlobalTimeline() {
  static Timeline* timeline = new Timeline();
  return *timeline;
}

bool Timeline::Start(const std::string& path, bool mark_cycles, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_) {
    std::fputs("{}]\n", file_);
    std::fclose(file_);
  }
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) {
    *error = "cannot open timeline file '" + path + "': " + std::strerror(errno);
    return false;
  }
  mark_cycles_ = mark_cycles;
  queued_.clear();
  // Close the JSON array at exit even when nobody calls shutdown.
  static bool at_exit_registered = (std::atexit([] { GlobalTimeline().Stop(); }), true);
  (void)at_exit_registered;
  start_ = std::chrono::steady_clock::now();
  ids_.clear();
  std::fputs("[\n", file_);
  std::fflush(file_);
  return true;
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  std::fputs("{}]\n", file_);  // an empty object lets every event line end in a comma
  std::fclose(file_);
  file_ = nullptr;
}

int64_t Timeline::Now() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now() - start_)
      .count();
}

int Timeline::TensorId(const std::string& tensor) {
  auto it = ids_.find(tensor);
  if (it != ids_.end()) return it->second;
  int id = static_cast<int>(ids_.size()) + 1;
  ids_[tensor] = id;
  std::fprintf(file_,
               "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
               "\"args\": {\"name\": \"%s\"}},\n",
               id, JsonEscape(tensor).c_str());
  std::fprintf(file_,
               "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, "
               "\"args\": {\"sort_index\": %d}},\n",
               id, id);
  return id;
}

void Timeline::Event(const std::string& tensor, char phase, const char* name,
                     const std::string& args) {
  int id = TensorId(tensor);
  std::fprintf(file_, "{\"ph\": \"%c\", \"name\": \"%s\", \"ts\": %lld, \"pid\": %d, \"tid\": 1%s},\n",
               phase, name, static_cast<long long>(Now()), id,
               args.empty() ? "" : (", \"args\": {" + args + "}").c_str());
}

void Timeline::NegotiateStart(const std::string& tensor, OpType op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  Event(tensor, 'B', ("NEGOTIATE_" + Upper(OpTypeName(op))).c_str());
}

void Timeline::NegotiateRankReady(const std::string& tensor, int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  Event(tensor, 'i', std::to_string(rank).c_str(), "\"ready_rank\": " + std::to_string(rank));
}

void Timeline::NegotiateEnd(const std::string& tensor) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  Event(tensor, 'E', "");
  Event(tensor, 'B', "QUEUE");
  queued_.insert(tensor);
}

void Timeline::QueueEnd(const std::string& tensor) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_ || queued_.erase(tensor) == 0) return;
  Event(tensor, 'E', "");
}

void Timeline::ActivityStart(const std::string& tensor, const char* activity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  Event(tensor, 'B', activity);
}

void Timeline::ActivityStart(const std::string& tensor, const char* activity, DataType dtype,
                             int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  Event(tensor, 'B', activity, std::string("\"dtype\": \"") + DataTypeName(dtype) +
                                   "\", \"bytes\": " + std::to_string(bytes));
}

void Timeline::ActivityEnd(const std::string& tensor) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_) return;
  Event(tensor, 'E', "");
}

void Timeline::MarkCycle() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!file_ || !mark_cycles_) return;
  std::fprintf(file_,
               "{\"ph\": \"i\", \"name\": \"CYCLE_START\", \"ts\": %lld, \"pid\": 0, "
               "\"tid\": 1, \"s\": \"g\"},\n",
               static_cast<long long>(Now()));
}

void Timeline::Flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_) std::fflush(file_);
}

bool TimelineIsDynamic(const std::string& value) {
  std::string v;
  for (char c : value) v += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "DYNAMIC";
}

}  // namespace tfhvd
