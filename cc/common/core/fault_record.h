// The report a rank leaves the launcher when its core stops: who it blames and
// why, as the text "culprit=<rank>\nkind=<kind>\n<message>" that the launcher
// parses (tf_hvd/runner/failures.py, parse_record). One type writes and reads it.
//
//   FaultRecord r{2, "lost", "connection closed"};
//   FaultRecord back;
//   FaultRecord::Parse(r.Text(), &back);   // true; back.culprit == 2
#ifndef TFHVD_COMMON_CORE_FAULT_RECORD_H_
#define TFHVD_COMMON_CORE_FAULT_RECORD_H_

#include <string>

namespace tfhvd {

struct FaultRecord {
  int culprit = -1;    // the rank blamed; -1: none (this rank failed by itself)
  std::string kind;    // "error", "lost", "stall", "shutdown", "exiting"
  std::string message;

  std::string Text() const;
  // False (and *out untouched) unless text starts with the culprit and kind
  // lines and the culprit is an integer, as the launcher reads it.
  static bool Parse(const std::string& text, FaultRecord* out);
};

}  // namespace tfhvd

#endif  // TFHVD_COMMON_CORE_FAULT_RECORD_H_
