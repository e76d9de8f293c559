#include "cc/common/tensor_queue.h"

namespace tfhvd {

Status TensorQueue::Add(TensorTableEntry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string& name = entry.request.name;
  if (closed_) return closed_status_;
  if (table_.count(name)) {
    return Status::InvalidArgument(
        "tensor '" + name + "': a collective with this name is already in flight "
        "on this rank; give concurrent collectives distinct names");
  }
  entry.enqueued = std::chrono::steady_clock::now();
  new_requests_.push_back(entry.request);
  table_.emplace(name, std::move(entry));
  cv_.notify_one();
  return Status();
}

void TensorQueue::PopNewRequests(std::vector<Request>* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!new_requests_.empty()) {
    out->push_back(std::move(new_requests_.front()));
    new_requests_.pop_front();
  }
}

void TensorQueue::WaitForWork(std::chrono::microseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout.count() <= 0) {
    notified_ = false;
    return;
  }
  cv_.wait_for(lock, timeout, [this] { return !new_requests_.empty() || notified_; });
  notified_ = false;
}

void TensorQueue::Notify() {
  std::lock_guard<std::mutex> lock(mutex_);
  notified_ = true;
  cv_.notify_one();
}

bool TensorQueue::Take(const std::string& name, TensorTableEntry* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = table_.find(name);
  if (it == table_.end()) return false;
  *out = std::move(it->second);
  table_.erase(it);
  return true;
}

bool TensorQueue::Contains(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.count(name) > 0;
}

void TensorQueue::FailAll(const Status& status) {
  std::unordered_map<std::string, TensorTableEntry> table;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    table.swap(table_);
    new_requests_.clear();
    closed_ = true;
    closed_status_ = status;
  }
  for (auto& kv : table) {
    if (kv.second.callback) kv.second.callback(status);
  }
}

size_t TensorQueue::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.size();
}

}  // namespace tfhvd
