// Copyright 2026 The contactkit developers.
//
// The settings API: lines "key=value" through ck_setSetting, ck_validateSettings, and a round
// trip: every value ck_getSetting prints of valid settings sets the same bits again.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "contactkit/contactkit.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ckSettings s;
  ck_defaultSettings(&s);
  char error[512];
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t eq = line.find('=');
    const std::string key = line.substr(0, eq);
    const std::string value = eq == std::string::npos ? std::string() : line.substr(eq + 1);
    if (key.find('\0') != std::string::npos || value.find('\0') != std::string::npos) continue;
    error[0] = 'x';
    error[1] = 0;
    const int r = ck_setSetting(&s, key.c_str(), eq == std::string::npos ? nullptr : value.c_str(),
                                error, sizeof(error));
    if ((r == 0) != (error[0] == 0)) {
      std::fprintf(stderr, "ck_setSetting returned %d with message '%s'\n", r, error);
      std::abort();
    }
  }
  if (ck_validateSettings(&s, error, sizeof(error)) != 0) return 0;

  // round trip of every key
  ckSettings copy;
  ck_defaultSettings(&copy);
  char buf[512];
  for (int i = 0; i < ck_numSettingKeys(); i++) {
    const char* key = ck_settingKey(i);
    if (ck_getSetting(&s, key, buf, sizeof(buf)) != 0 ||
        ck_setSetting(&copy, key, buf, error, sizeof(error)) != 0) {
      std::fprintf(stderr, "key %s: value '%s' does not set again: %s\n", key, buf, error);
      std::abort();
    }
  }
  if (std::memcmp(&s, &copy, sizeof(ckSettings)) != 0) {
    std::fprintf(stderr, "settings differ after the round trip through text\n");
    std::abort();
  }
  return 0;
}
