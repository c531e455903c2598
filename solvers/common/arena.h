// Copyright 2026 The contactkit developers.
//
// One zeroed block of typed arrays. A layout function names the arrays (Take<T>(n) each); the
// arena runs it once to count bytes, allocates, and runs it again to hand the arrays out.
#ifndef CONTACTKIT_SOLVERS_COMMON_ARENA_H_
#define CONTACTKIT_SOLVERS_COMMON_ARENA_H_

#include <cstddef>
#include <cstdlib>
#include <new>

namespace contactkit {

// carves typed arrays (64-byte aligned, at least one element each) out of a block; with
// base == nullptr it only counts bytes
class ArenaCarver {
 public:
  explicit ArenaCarver(char* base) : base_(base) {}
  template <typename T>
  T* Take(size_t n) {
    used_ = (used_ + 63) & ~static_cast<size_t>(63);
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += sizeof(T) * (n ? n : 1);
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// owns the block; Allocate(layout) with layout(ArenaCarver&) taking every array
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() { std::free(block_); }

  template <typename Layout>
  void Allocate(Layout&& layout) {
    std::free(block_);
    block_ = nullptr;
    ArenaCarver count(nullptr);
    layout(count);
    bytes_ = count.used() + 64;
    block_ = std::calloc(1, bytes_);
    if (!block_) throw std::bad_alloc();
    ArenaCarver carve(static_cast<char*>(block_));
    layout(carve);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* block_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_ARENA_H_
