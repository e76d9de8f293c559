// The few libstdc++ symbols that GCC 9 and 10 added (GLIBCXX_3.4.26 and later) and that code
// compiled against GCC 10's headers calls, defined inside the library itself (hidden), so that
// it runs on GCC 8's libstdc++ (the floor, GLIBCXX_3.4.25). devtoolset's libstdc++_nonshared.a
// does the same for RHEL's compilers. tools/release/floor/toolchain.sh compiles this file and the
// compiler wrapper links it into every shared library it makes; tools/release/check_wheels.py fails a
// wheel that still needs a newer symbol, so a new one shows up there and is added here.
#include <new>
#include <sstream>

#define TF_HVD_FLOOR_DEFINE(name, mangled) \
  extern "C" __attribute__((visibility("hidden"))) void name(void* self) __asm__(mangled)

// GCC 9 gave the string streams separate default constructors (GLIBCXX_3.4.26); GCC 8's
// default argument meant the open-mode constructor with the same mode, which is what they do.
TF_HVD_FLOOR_DEFINE(tf_hvd_floor_ostringstream,
                    "_ZNSt7__cxx1119basic_ostringstreamIcSt11char_traitsIcESaIcEEC1Ev");
TF_HVD_FLOOR_DEFINE(tf_hvd_floor_stringstream,
                    "_ZNSt7__cxx1118basic_stringstreamIcSt11char_traitsIcESaIcEEC1Ev");
TF_HVD_FLOOR_DEFINE(tf_hvd_floor_istringstream,
                    "_ZNSt7__cxx1119basic_istringstreamIcSt11char_traitsIcESaIcEEC1Ev");

void tf_hvd_floor_ostringstream(void* self) { ::new (self) std::ostringstream(std::ios_base::out); }
void tf_hvd_floor_stringstream(void* self) {
  ::new (self) std::stringstream(std::ios_base::in | std::ios_base::out);
}
void tf_hvd_floor_istringstream(void* self) { ::new (self) std::istringstream(std::ios_base::in); }
