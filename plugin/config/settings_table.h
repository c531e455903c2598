// Copyright 2026 The contactkit developers.
//
// The one table of setting keys (plugin/config/settings.cc): name, type, place in ckSettings,
// allowed range, default and documentation. The MJCF plugin tag, <custom> fields, the CLI's
// --set, MuJoCo 3.x plugin registration, ck_settingDoc and
// docs/settings.md (via ck-run --list-settings) all read it.
#ifndef CONTACTKIT_PLUGIN_SETTINGS_TABLE_H_
#define CONTACTKIT_PLUGIN_SETTINGS_TABLE_H_

#include <cstddef>
#include <string>

#include "contactkit/settings.h"

namespace contactkit {

enum KeyType : int {
  kKeyReal = 0,  // double; range [lo, hi] with open ends where flagged
  kKeyInt,       // int in [lo, hi]
  kKeyBool,      // 0/1, true/false
  kKeyName,      // one of the key's names (names, nnames), stored as its index
  kKeyReal5,     // five doubles separated by spaces (solimp-like), each in [lo, hi]
};

struct KeyInfo {
  const char* name;       // key as written in MJCF
  const char* group;      // "common", "ipm", "comfree", "lcp", "derivative", "adaptive"
  KeyType type;           // value type
  size_t offset;          // byte offset in ckSettings
  double lo, hi;          // allowed range
  bool lo_open, hi_open;  // exclude lo / hi
  const char* def;        // default as text
  const char* doc;        // one line: meaning and unit
  const char* const* names = nullptr;  // kKeyName: the allowed names, by value
  int nnames = 0;                      // kKeyName: their count
};

// the table and its length
const KeyInfo* SettingKeys(int* n);

// the entry for a key, or null
const KeyInfo* FindSettingKey(const char* name);

// copy msg into an (error, error_sz) buffer of the C API (error may be NULL)
void SetError(char* error, int error_sz, const std::string& msg);

// prefix of <custom> field names that carry settings
constexpr const char kCustomPrefix[] = "contactkit:";

// name of the MJCF plugin (<extension><plugin plugin="contactkit.solver">)
constexpr const char kPluginName[] = "contactkit.solver";

// MuJoCo 2.x: <custom><text> that ck_loadXML adds with "<instance name>|<key> <key> ...", so that
// messages can tell settings from the plugin tag apart from the user's own <custom> fields
constexpr const char kTagField[] = "contactkit.plugin";

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_SETTINGS_TABLE_H_
