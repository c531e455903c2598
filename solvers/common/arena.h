// Copyright 2026 The contactkit developers.
//
// One zeroed block of typed arrays. A layout function names the arrays (Take<T>(n) each); the
// arena runs it once to count bytes, allocates, and runs it again to hand the arrays out. And one
// zeroed array whose memory is taken page by page as it is written (ZeroedArray).
#ifndef CONTACTKIT_SOLVERS_COMMON_ARENA_H_
#define CONTACTKIT_SOLVERS_COMMON_ARENA_H_

#include <cstddef>
#include <cstdlib>
#include <new>

// ZeroedArray maps its pages itself but under AddressSanitizer: its allocator checks the bounds,
// and with the array's own mappings the process grew by 17.6 MB in 30 settings changes there
// (ReliabilityTest.SettingsChangesKeepMemoryFlat)
#if defined(__SANITIZE_ADDRESS__)
#define CK_ZEROED_ARRAY_MAPS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CK_ZEROED_ARRAY_MAPS 0
#endif
#endif
#if !defined(CK_ZEROED_ARRAY_MAPS) && defined(_WIN32)
#define CK_ZEROED_ARRAY_MAPS 0
#elif !defined(CK_ZEROED_ARRAY_MAPS)
#define CK_ZEROED_ARRAY_MAPS 1
#endif
#if CK_ZEROED_ARRAY_MAPS
#include <sys/mman.h>
#endif

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

// A zeroed array whose pages cost memory only once written: a large one is mapped from fresh
// pages of the operating system (zero, and backed by memory on the first write), where
// std::vector's assign writes every element (and calloc may hand back, and clear, memory the
// process used before: MuJoCo 3.x's compiler raises glibc's mmap threshold). A dense workspace
// sized for the largest possible island then holds memory for the islands actually solved (a
// page fault on first use, no allocation in a step)
template <typename T>
class ZeroedArray {
 public:
  ZeroedArray() = default;
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;
  ~ZeroedArray() { Release(); }

  // n zero elements (at least one); throws std::bad_alloc
  void Allocate(size_t n) {
    Release();
    const size_t bytes = (n ? n : 1) * sizeof(T);
#if CK_ZEROED_ARRAY_MAPS
    if (bytes >= kMapBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      data_ = static_cast<T*>(p);
      bytes_ = bytes;
      size_ = n;
      return;
    }
#endif
    data_ = static_cast<T*>(std::calloc(1, bytes));
    if (!data_) throw std::bad_alloc();
    size_ = n;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }

 private:
  static constexpr size_t kMapBytes = 1 << 16;  // mapped from this size on
  void Release() {
#if CK_ZEROED_ARRAY_MAPS
    if (bytes_) munmap(data_, bytes_);
#endif
    if (!bytes_) std::free(data_);
    data_ = nullptr;
    size_ = bytes_ = 0;
  }
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t bytes_ = 0;  // mapped size, 0: from calloc
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_ARENA_H_
