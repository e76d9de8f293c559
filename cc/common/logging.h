// Leveled logging to stderr with a rank prefix. The level is HOROVOD_LOG_LEVEL,
// parsed with the other knobs (parameters.h) and set once at hvd.init().
#ifndef TFHVD_COMMON_LOGGING_H_
#define TFHVD_COMMON_LOGGING_H_

#include <sstream>
#include <string>

namespace tfhvd {

enum class LogLevel { TRACE = 0, DEBUG, INFO, WARNING, ERROR, FATAL };

// Messages below this level are dropped; WARNING until init sets it.
LogLevel MinLogLevel();
void SetMinLogLevel(LogLevel level);
// "trace" .. "fatal" (HOROVOD_LOG_LEVEL's values, lower case); anything else: WARNING.
LogLevel LogLevelFromName(const std::string& name);
void SetLogRank(int rank);
// HOROVOD_LOG_HIDE_TIME: leave the date and time out of log lines.
void SetLogHideTime(bool hide);

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
