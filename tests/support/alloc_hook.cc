// Copyright 2026 The contactkit developers.
//
// Counts heap allocations of the current thread by interposing malloc and friends (glibc lets an
// executable define them and forward to __libc_*). operator new and Eigen allocate through them.
// Disabled under sanitizers, which interpose malloc themselves.
#include <cstddef>
#include <cstdlib>

#include "support/fixture.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CK_NO_ALLOC_HOOK 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CK_NO_ALLOC_HOOK 1
#endif
#endif

namespace {
thread_local bool t_counting = false;
thread_local long t_count = 0;
}  // namespace

#ifndef CK_NO_ALLOC_HOOK
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

void* malloc(size_t n) {
  if (t_counting) t_count++;
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  if (t_counting) t_count++;
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  if (t_counting) t_count++;
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(size_t a, size_t n) {
  if (t_counting) t_count++;
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  if (t_counting) t_count++;
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  if (t_counting) t_count++;
  *out = __libc_memalign(a, n);
  return *out ? 0 : 12;
}
}  // extern "C"
#endif

namespace contactkit::test {

bool AllocationCounter::Available() {
#ifdef CK_NO_ALLOC_HOOK
  return false;
#else
  return true;
#endif
}

void AllocationCounter::Start() {
  t_count = 0;
  t_counting = true;
}

long AllocationCounter::Stop() {
  t_counting = false;
  return t_count;
}

}  // namespace contactkit::test
