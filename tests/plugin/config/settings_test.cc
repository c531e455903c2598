// Copyright 2026 The contactkit developers.
//
// Settings from text: every key round-trips through ck_setSetting / ck_getSetting, bad values are
// rejected with a message that names the key and what is allowed, and ck_validateSettings checks
// ranges and the relations between keys.
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

using SettingsTest = MujocoTest;

std::string Get(const ckSettings& s, const char* key) {
  char buf[256] = "";
  EXPECT_EQ(ck_getSetting(&s, key, buf, sizeof(buf)), 0) << key;
  return buf;
}

bool SameSettings(const ckSettings& a, const ckSettings& b) {
  return std::memcmp(&a, &b, sizeof(ckSettings)) == 0;
}

TEST_F(SettingsTest, KeysAreUniqueAndDocumented) {
  const int n = ck_numSettingKeys();
  ASSERT_GT(n, 0);
  std::set<std::string> names;
  for (int i = 0; i < n; i++) {
    ASSERT_NE(ck_settingKey(i), nullptr) << i;
    ASSERT_NE(ck_settingDoc(i), nullptr) << i;
    EXPECT_GT(std::strlen(ck_settingDoc(i)), 0u) << ck_settingKey(i);
    EXPECT_TRUE(names.insert(ck_settingKey(i)).second) << "repeated key " << ck_settingKey(i);
  }
  EXPECT_EQ(ck_settingKey(-1), nullptr);
  EXPECT_EQ(ck_settingKey(n), nullptr);
  EXPECT_EQ(ck_settingDoc(n), nullptr);
  EXPECT_TRUE(names.count("solver"));
  EXPECT_TRUE(names.count("kappa_tol"));
}

TEST_F(SettingsTest, EveryKeyRoundTripsItsDefault) {
  ckSettings defaults;
  ck_defaultSettings(&defaults);
  EXPECT_EQ(ck_validateSettings(&defaults, nullptr, 0), 0);
  EXPECT_EQ(defaults.solver, ckSOL_MUJOCO);

  // a zeroed struct set key by key from the default texts equals the defaults
  ckSettings s;
  std::memset(&s, 0, sizeof(s));
  for (int i = 0; i < ck_numSettingKeys(); i++) {
    const char* key = ck_settingKey(i);
    const std::string text = Get(defaults, key);
    char error[512] = "";
    ASSERT_EQ(ck_setSetting(&s, key, text.c_str(), error, sizeof(error)), 0)
        << key << " = '" << text << "': " << error;
    EXPECT_EQ(Get(s, key), text) << key;
  }
  EXPECT_TRUE(SameSettings(s, defaults));
}

TEST_F(SettingsTest, ValuesRoundTripExactly) {
  struct Case {
    const char* key;
    const char* value;
    const char* expect;  // ck_getSetting text
  };
  const Case cases[] = {
      {"solver", "ipm", "ipm"},
      {"solver", " lcp ", "lcp"},
      {"warmstart", "false", "0"},
      {"warmstart", "true", "1"},
      {"kappa_tol", "1e-9", "1e-09"},
      {"kappa_grad", "0.5", "0.5"},
      {"max_iter", "1000", "1000"},
      {"facets", "64", "64"},
      {"restitution_threshold", "1e300", "1e+300"},
      {"stiffness", "0.1234567890123456", "0.1234567890123456"},
      {"cfd_solimp", "0.1 0.2 0.3 0.4 5", "0.1 0.2 0.3 0.4 5"},
  };
  for (const Case& c : cases) {
    ckSettings s;
    ck_defaultSettings(&s);
    char error[512] = "";
    ASSERT_EQ(ck_setSetting(&s, c.key, c.value, error, sizeof(error)), 0) << c.key << ": " << error;
    const std::string text = Get(s, c.key);
    EXPECT_EQ(text, c.expect) << c.key;

    // the printed text reads back to the same bits
    ckSettings t = s;
    ASSERT_EQ(ck_setSetting(&t, c.key, text.c_str(), error, sizeof(error)), 0) << error;
    EXPECT_TRUE(SameSettings(s, t)) << c.key;
  }
  ckSettings s;
  ck_defaultSettings(&s);
  ASSERT_EQ(ck_setSetting(&s, "kappa_tol", "1e-9", nullptr, 0), 0);
  EXPECT_EQ(s.ipm.kappa_tol, 1e-9);
  ASSERT_EQ(ck_setSetting(&s, "facets", "8", nullptr, 0), 0);
  EXPECT_EQ(s.comfree.facets, 8);
  ASSERT_EQ(ck_setSetting(&s, "solver", "comfree", nullptr, 0), 0);
  EXPECT_EQ(s.solver, ckSOL_COMFREE);
}

TEST_F(SettingsTest, BadValuesAreRejectedAndLeaveSettingsAlone) {
  struct Case {
    const char* key;
    const char* value;
  };
  const Case cases[] = {
      {"solver", "pgs"},
      {"solver", "IPM"},
      {"solver", ""},
      {"warmstart", "yes"},
      {"warmstart", "2"},
      {"kappa_tol", "0"},
      {"kappa_tol", "1"},
      {"kappa_tol", "-1e-8"},
      {"kappa_tol", "nan"},
      {"kappa_tol", "abc"},
      {"kappa_tol", "1e-8x"},
      {"kappa_tol", ""},
      {"kappa_tol", "1e-8 1e-9"},
      {"residual_tol", "1e999"},
      {"max_iter", "0"},
      {"max_iter", "1001"},
      {"max_iter", "1.5"},
      {"gap_recheck", "4"},
      {"facets", "5"},
      {"facets", "7"},
      {"facets", "2"},
      {"facets", "66"},
      {"stiffness", "0"},
      {"damping", "-0.1"},
      {"erp", "1.5"},
      {"restitution", "-1"},
      {"restitution_threshold", "inf"},
      {"cfm", "1"},
      {"max_pivots", "0"},
      {"pgs_iter", "abc"},
      {"cfd_width", "2"},
      {"cfd_solimp", "1 2 3"},
      {"cfd_solimp", "1 2 3 4 5 6"},
      {"cfd_solimp", "1 2 3 4 -5"},
      {"elastic_correction", "on"},
  };
  ckSettings defaults;
  ck_defaultSettings(&defaults);
  for (const Case& c : cases) {
    ckSettings s = defaults;
    char error[512] = "";
    EXPECT_EQ(ck_setSetting(&s, c.key, c.value, error, sizeof(error)), -1)
        << c.key << " = '" << c.value << "' was accepted";
    const std::string msg = error;
    EXPECT_NE(msg.find(std::string("'") + c.key + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allowed"), std::string::npos) << msg;
    EXPECT_TRUE(SameSettings(s, defaults)) << c.key << " = '" << c.value << "' changed settings";
  }
}

TEST_F(SettingsTest, OddFacetsNamedAsOdd) {
  ckSettings s;
  ck_defaultSettings(&s);
  char error[512] = "";
  ASSERT_EQ(ck_setSetting(&s, "facets", "9", error, sizeof(error)), -1);
  EXPECT_NE(std::string(error).find("odd"), std::string::npos) << error;
  EXPECT_NE(std::string(error).find("even"), std::string::npos) << error;
}

TEST_F(SettingsTest, UnknownKeyListsKnownKeys) {
  ckSettings s;
  ck_defaultSettings(&s);
  char error[1024] = "";
  ASSERT_EQ(ck_setSetting(&s, "kappa", "1e-8", error, sizeof(error)), -1);
  const std::string msg = error;
  EXPECT_NE(msg.find("'kappa'"), std::string::npos) << msg;
  for (int i = 0; i < ck_numSettingKeys(); i++) {
    EXPECT_NE(msg.find(ck_settingKey(i)), std::string::npos) << msg;
  }
  EXPECT_EQ(ck_setSetting(&s, nullptr, "1", nullptr, 0), -1);
  char buf[64];
  EXPECT_EQ(ck_getSetting(&s, "kappa", buf, sizeof(buf)), -1);
}

TEST_F(SettingsTest, ValidateChecksRangesAndKappaOrder) {
  ckSettings defaults;
  ck_defaultSettings(&defaults);
  struct Case {
    const char* key;  // must appear in the message
    void (*spoil)(ckSettings*);
  };
  const Case cases[] = {
      {"kappa_grad",
       [](ckSettings* s) {
         s->ipm.kappa_tol = 1e-6;
         s->ipm.kappa_grad = 1e-7;
       }},
      {"kappa_tol", [](ckSettings* s) { s->ipm.kappa_tol = NAN; }},
      {"max_iter", [](ckSettings* s) { s->ipm.max_iter = 0; }},
      {"facets", [](ckSettings* s) { s->comfree.facets = 5; }},
      {"solver", [](ckSettings* s) { s->solver = ckNSOLVER; }},
      {"warmstart", [](ckSettings* s) { s->warmstart = 2; }},
      {"cfd_solimp", [](ckSettings* s) { s->deriv.cfd_solimp[3] = -1; }},
  };
  for (const Case& c : cases) {
    ckSettings s = defaults;
    c.spoil(&s);
    char error[512] = "";
    EXPECT_EQ(ck_validateSettings(&s, error, sizeof(error)), -1) << c.key;
    EXPECT_NE(std::string(error).find(c.key), std::string::npos) << error;
    EXPECT_NE(std::string(error).find("allowed"), std::string::npos) << error;
  }

  // kappa_grad == kappa_tol is allowed
  ckSettings s = defaults;
  s.ipm.kappa_grad = s.ipm.kappa_tol;
  EXPECT_EQ(ck_validateSettings(&s, nullptr, 0), 0);
}

TEST_F(SettingsTest, SolverNamesAndIds) {
  for (int i = 0; i < ckNSOLVER; i++) EXPECT_EQ(ck_solverId(ck_solverName(i)), i);
  EXPECT_EQ(ck_solverId("pgs"), -1);
  EXPECT_EQ(ck_solverId(nullptr), -1);
  EXPECT_EQ(ck_solverAvailable(ckSOL_MUJOCO), 1);
}

}  // namespace
}  // namespace contactkit::test
