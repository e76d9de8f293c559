/* Forced into every C and C++ file of the release wheels (tools/release/floor/toolchain.sh): what the
 * bullseye sysroot (glibc 2.31, GCC 10's libstdc++) would otherwise make the library need
 * beyond the floor, glibc 2.28 and GCC 8's libstdc++ (GLIBCXX_3.4.25, CXXABI_1.3.11).
 * tools/release/check_wheels.py proves the result from the ELF files. */
#ifndef TF_HVD_GLIBC_FLOOR_H_
#define TF_HVD_GLIBC_FLOOR_H_

#ifdef __cplusplus
/* GCC 10's <condition_variable>, <mutex> and <shared_mutex> wait with the glibc 2.30 calls
 * pthread_cond_clockwait / pthread_mutex_clocklock / pthread_rwlock_clock*lock when the
 * configuration says they exist; without them they wait on CLOCK_REALTIME as GCC 8 did. */
#include <bits/c++config.h>
#undef _GLIBCXX_USE_PTHREAD_COND_CLOCKWAIT
#undef _GLIBCXX_USE_PTHREAD_MUTEX_CLOCKLOCK
#undef _GLIBCXX_USE_PTHREAD_RWLOCK_CLOCKLOCK
#endif

/* glibc 2.29 gave exp, log, pow, exp2 and log2 new versions (faster code, the same results
 * within their documented error); a library linked on 2.31 would need GLIBC_2.29. Bind them
 * to the versions every glibc since the architecture's first has. */
#if defined(__x86_64__)
#define TF_HVD_FLOOR_LIBM_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define TF_HVD_FLOOR_LIBM_VERSION "GLIBC_2.17"
#endif
#ifdef TF_HVD_FLOOR_LIBM_VERSION
__asm__(".symver exp,exp@" TF_HVD_FLOOR_LIBM_VERSION);
__asm__(".symver log,log@" TF_HVD_FLOOR_LIBM_VERSION);
__asm__(".symver pow,pow@" TF_HVD_FLOOR_LIBM_VERSION);
__asm__(".symver exp2,exp2@" TF_HVD_FLOOR_LIBM_VERSION);
__asm__(".symver log2,log2@" TF_HVD_FLOOR_LIBM_VERSION);
#endif

#endif  /* TF_HVD_GLIBC_FLOOR_H_ */
