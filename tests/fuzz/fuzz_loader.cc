// Copyright 2026 The contactkit developers.
//
// The loader: any text through ck_loadXMLString (plugin tag, <custom> fields, MuJoCo's parser),
// then ck_make with the model's settings. Either a model and a handle, or NULL with a message.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "contactkit/contactkit.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool init = (contactkit::fuzz::InstallHandlers(), true);
  (void)init;
  const std::string xml(reinterpret_cast<const char*>(data), size);
  if (xml.find('\0') != std::string::npos) return 0;  // a C string ends there
  char error[1000] = "";
  mjModel* m = ck_loadXMLString(xml.c_str(), error, sizeof(error));
  if (!m) {
    if (!error[0]) {
      std::fprintf(stderr, "ck_loadXMLString returned NULL without a message\n");
      std::abort();
    }
    return 0;
  }
  // the model's own settings were checked by the loader: ck_make must accept them
  ckHandle* ck = ck_make(m, nullptr, error, sizeof(error));
  if (ck) {
    mjData* d = mj_makeData(m);
    if (d) {
      ck_step(ck, m, d);
      mj_deleteData(d);
    }
    ck_free(ck);
  } else if (!error[0]) {
    std::fprintf(stderr, "ck_make returned NULL without a message\n");
    std::abort();
  }
  mj_deleteModel(m);
  return 0;
}
