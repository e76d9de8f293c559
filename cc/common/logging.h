// Leveled logging to stderr with a rank prefix (HOROVOD_LOG_LEVEL).
#ifndef TFHVD_COMMON_LOGGING_H_
#define TFHVD_COMMON_LOGGING_H_

#include <sstream>

namespace tfhvd {

enum class LogLevel { TRACE = 0, DEBUG, INFO, WARNING, ERROR, FATAL };

// Reads HOROVOD_LOG_LEVEL once; default WARNING.
LogLevel MinLogLevel();
void SetLogRank(int rank);

class LogMessage : public std::basic_ostringstream<char> {
 public:
  LogMessage(const char* file, int line, LogLevel level);
  ~LogMessage() override;

 private:
  const char* file_;
  int line_;
  LogLevel level_;
};

}  // namespace tfhvd

#define TFHVD_LOG(LEVEL)                                                   \
  if (::tfhvd::LogLevel::LEVEL >= ::tfhvd::MinLogLevel())                  \
  ::tfhvd::LogMessage(__FILE__, __LINE__, ::tfhvd::LogLevel::LEVEL)

#endif  // TFHVD_COMMON_LOGGING_H_
