// Copyright 2026 The contactkit developers.
//
// What the fuzz targets share: MuJoCo errors are findings (a library must not reach mju_error,
// whose default handler exits the process), warnings are expected and ignored.
#ifndef CONTACTKIT_TESTS_FUZZ_FUZZ_COMMON_H_
#define CONTACTKIT_TESTS_FUZZ_FUZZ_COMMON_H_

#include <mujoco/mujoco.h>

#include <cstdio>
#include <cstdlib>

namespace contactkit::fuzz {

inline void OnError(const char* msg) {
  std::fprintf(stderr, "MuJoCo error reached: %s\n", msg);
  std::abort();
}

inline void OnWarning(const char*) {}

// install the handlers once per process
inline void InstallHandlers() {
  mju_user_error = OnError;
  mju_user_warning = OnWarning;
}

}  // namespace contactkit::fuzz

#endif  // CONTACTKIT_TESTS_FUZZ_FUZZ_COMMON_H_
