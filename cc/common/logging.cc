#include "cc/common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

namespace tfhvd {

namespace {
std::atomic<int> log_rank{-1};
std::atomic<LogLevel> min_level{LogLevel::WARNING};
std::atomic<bool> hide_time{false};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::TRACE: return "TRACE";
    case LogLevel::DEBUG: return "DEBUG";
    case LogLevel::INFO: return "INFO";
    case LogLevel::WARNING: return "WARNING";
    case LogLevel::ERROR: return "ERROR";
    case LogLevel::FATAL: return "FATAL";
  }
  return "?";
}
}  // namespace

LogLevel LogLevelFromName(const std::string& v) {
  if (v == "trace") return LogLevel::TRACE;
  if (v == "debug") return LogLevel::DEBUG;
  if (v == "info") return LogLevel::INFO;
  if (v == "error") return LogLevel::ERROR;
  if (v == "fatal") return LogLevel::FATAL;
  return LogLevel::WARNING;
}

LogLevel MinLogLevel() { return min_level.load(std::memory_order_relaxed); }

void SetMinLogLevel(LogLevel level) { min_level = level; }

void SetLogRank(int rank) { log_rank = rank; }

void SetLogHideTime(bool hide) { hide_time = hide; }

LogMessage::LogMessage(const char* file, int line, LogLevel level)
    : file_(file), line_(line), level_(level) {}

LogMessage::~LogMessage() {
  const char* base = std::strrchr(file_, '/');
  base = base ? base + 1 : file_;
  char stamp[32] = "";
  if (!hide_time.load(std::memory_order_relaxed)) {
    std::time_t now = std::time(nullptr);
    std::tm local;
    localtime_r(&now, &local);
    std::strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S ", &local);
  }
  int rank = log_rank.load();
  std::string prefix = rank >= 0 ? "[" + std::to_string(rank) + "]" : "[?]";
  std::fprintf(stderr, "%s[%s%s tf_hvd %s:%d] %s\n", prefix.c_str(), stamp,
               LevelName(level_), base, line_, str().c_str());
  std::fflush(stderr);
}

}  // namespace tfhvd
