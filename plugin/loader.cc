// Copyright 2026 The contactkit developers.
#include "contactkit/contactkit.h"

extern "C" mjModel* ck_loadXML(const char* filename, const mjVFS* vfs, char* error,
                               int error_sz) {
  return mj_loadXML(filename, vfs, error, error_sz);
}
