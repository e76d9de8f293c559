// The one list of HOROVOD_* environment knobs tf_hvd reads: name, type,
// default, who sets it, meaning, and which Parameters field receives it.
// Parameters::FromEnvironment parses them all through this list; the Python
// module exposes it (tf_hvd._hvd.knobs()), and docs/knobs.md's table is
// generated from it (tools/codegen/gen_knob_table.py, checked by tests/unit/test_knobs.py).
//
// Example: a new knob is one row in kKnobs (knobs.cc) plus its Parameters field:
//   {"HOROVOD_FOO_BYTES", KnobType::BYTES, &Parameters::foo_bytes, "4096", 0, kNoMax,
//    "", kUser, "", "What it does."},
#ifndef TFHVD_COMMON_KNOBS_H_
#define TFHVD_COMMON_KNOBS_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "cc/common/common.h"
#include "cc/common/parameters.h"

namespace tfhvd {

enum class KnobType {
  BOOL,          // 1/0/true/false/yes/no (any case)
  INT,           // a plain integer in [min, max]
  BYTES,         // a plain integer number of bytes in [min, max] (no "1M" suffixes)
  SECONDS,       // a finite number in [min, max]
  MILLISECONDS,  // a finite number in [min, max]
  NUMBER,        // a finite number in [min, max], no unit
  STRING,        // any text
  ENUM,          // one of `values` (any case; stored in lower case)
};

using KnobTarget = std::variant<bool Parameters::*, int64_t Parameters::*,
                                double Parameters::*, std::string Parameters::*>;

struct KnobSpec {
  const char* name;
  KnobType type;
  KnobTarget target;
  // The default as docs/knobs.md shows it. A plain value parses to the field's
  // default (checked by the tests); "(...)" describes a default that depends
  // on something else.
  const char* default_text;
  double min;
  double max;
  const char* values;  // ENUM: the allowed values, comma-separated
  const char* set_by;  // "user" or "launcher"
  const char* flag;    // the tfhvdrun flag that sets it, "" if none
  const char* meaning;
};

constexpr double kNoMax = 9.2e18;  // integers: up to INT64_MAX

const std::vector<KnobSpec>& Knobs();
const KnobSpec* FindKnob(const std::string& name);
const char* KnobTypeName(KnobType type);

// Parses one value for `spec` into *out; the error names the variable, the
// value and what was expected: "HOROVOD_X='v' is not a valid value: expected ...".
Status ParseKnob(const KnobSpec& spec, const std::string& text, Parameters* out);

// The value of spec's field in p as text ("1"/"0" for bools).
std::string KnobValueText(const KnobSpec& spec, const Parameters& p);

// HOROVOD_* names in `environ` (NAME=VALUE strings) that are not knobs, sorted.
std::vector<std::string> UnknownKnobs(char** environ);

}  // namespace tfhvd

#endif  // TFHVD_COMMON_KNOBS_H_
