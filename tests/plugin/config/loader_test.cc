// Copyright 2026 The contactkit developers.
//
// ck_loadXML and settings from a model: the plugin tag and <custom> fields give the same settings
// on every MuJoCo version, bad input fails with a message naming the problem and its line,
// includes, meshes and user VFS keep working, and the tag changes nothing in the physics.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

#define CK_TEST_MJ3 (mjVERSION_HEADER >= 300)

// the plugin tag with the given <config> lines
std::string Tag(const std::string& configs, const std::string& instance = "contact") {
  return "  <extension>\n"
         "    <plugin plugin=\"contactkit.solver\">\n"
         "      <instance name=\"" +
         instance + "\">\n" + configs +
         "      </instance>\n"
         "    </plugin>\n"
         "  </extension>\n";
}

std::string Config(const std::string& key, const std::string& value) {
  return "        <config key=\"" + key + "\" value=\"" + value + "\"/>\n";
}

// a small scene with contacts: a plane, a box and a capsule
const char kScene[] =
    "  <option timestep=\"0.005\"/>\n"
    "  <worldbody>\n"
    "    <geom type=\"plane\" size=\"2 2 .1\"/>\n"
    "    <body pos=\"0 0 .3\"><freejoint/><geom type=\"box\" size=\".1 .1 .1\"/></body>\n"
    "    <body pos=\".05 0 .6\" euler=\"20 10 0\"><freejoint/>\n"
    "      <geom type=\"capsule\" size=\".05 .1\"/></body>\n"
    "  </worldbody>\n";

std::string Model(const std::string& body) { return "<mujoco>\n" + body + "</mujoco>\n"; }

// true if msg points at line (as "file:<line>:", or as MuJoCo's "line <line>" or tinyxml2's
// "Line number=<line>")
bool HasLine(const std::string& msg, int line) {
  const std::string n = std::to_string(line);
  return std::regex_search(
      msg, std::regex("(:" + n + ":|line " + n + "|Line number=" + n + ")([^0-9]|$)"));
}

// a temporary directory, removed with its files at the end of the test
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/ck_loader_XXXXXX";
    path_ = mkdtemp(name) ? name : "";
  }
  ~TempDir() {
    for (auto it = files_.rbegin(); it != files_.rend(); ++it) std::remove(it->c_str());
  }
  const std::string& path() const { return path_; }

  // write a file (relative path; folders are made) and return its full path
  std::string Write(const std::string& rel, const std::string& text) {
    for (size_t slash = rel.find('/'); slash != std::string::npos;
         slash = rel.find('/', slash + 1)) {
      const std::string dir = path_ + "/" + rel.substr(0, slash);
      if (mkdir(dir.c_str(), 0700) == 0) files_.push_back(dir);
    }
    const std::string full = path_ + "/" + rel;
    std::ofstream(full) << text;
    files_.push_back(full);
    return full;
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

// a VFS on the heap (2 MB on MuJoCo 2.x), freed with mj_deleteVFS
struct VfsDeleter {
  void operator()(mjVFS* vfs) const {
    mj_deleteVFS(vfs);
    delete vfs;
  }
};
using VfsPtr = std::unique_ptr<mjVFS, VfsDeleter>;

VfsPtr MakeVfs() {
  VfsPtr vfs(new mjVFS);
  mj_defaultVFS(vfs.get());
  return vfs;
}

void AddToVfs(mjVFS* vfs, const std::string& name, const std::string& text) {
#if CK_TEST_MJ3
  ASSERT_EQ(mj_addBufferVFS(vfs, name.c_str(), text.data(), static_cast<int>(text.size())), 0);
#else
  ASSERT_EQ(mj_makeEmptyFileVFS(vfs, name.c_str(), static_cast<int>(text.size())), 0);
  std::memcpy(vfs->filedata[mj_findFileVFS(vfs, name.c_str())], text.data(), text.size());
#endif
}

class LoaderTest : public MujocoTest {
 protected:
  // settings of a model loaded from xml; fails the test if loading or reading fails
  ckSettings SettingsOf(const std::string& xml, int expect_found = 1) {
    ckSettings s;
    ck_defaultSettings(&s);
    ModelPtr m = LoadString(xml);
    if (!m) return s;
    char error[1024] = "";
    EXPECT_EQ(ck_settingsFromModel(m.get(), &s, error, sizeof(error)), expect_found) << error;
    return s;
  }

  // message of a model that must fail to load
  std::string LoadError(const std::string& xml) {
    std::string error;
    ModelPtr m = LoadString(xml, &error);
    EXPECT_FALSE(m) << "loaded:\n" << xml;
    EXPECT_FALSE(error.empty());
    return error;
  }
};

//---------------------------------- settings from the model ---------------------------------------

TEST_F(LoaderTest, PluginTagGivesSettings) {
  const ckSettings s = SettingsOf(Model(Tag(Config("solver", "ipm") + Config("kappa_tol", "1e-9") +
                                            Config("facets", "8") + Config("warmstart", "false")) +
                                        kScene));
  EXPECT_EQ(s.solver, ckSOL_IPM);
  EXPECT_EQ(s.ipm.kappa_tol, 1e-9);
  EXPECT_EQ(s.comfree.facets, 8);
  EXPECT_EQ(s.warmstart, 0);
  ckSettings defaults;
  ck_defaultSettings(&defaults);
  EXPECT_EQ(s.ipm.kappa_grad, defaults.ipm.kappa_grad);
  EXPECT_EQ(s.lcp.erp, defaults.lcp.erp);
}

TEST_F(LoaderTest, CustomFieldsGiveTheSameSettingsAsTheTag) {
  const ckSettings tag = SettingsOf(
      Model(Tag(Config("solver", "lcp") + Config("erp", "0.25") + Config("max_pivots", "77") +
                Config("cfd_solimp", "0.1 0.8 0.02 0.5 2") + Config("soft_equality", "1")) +
            kScene));
  const ckSettings text =
      SettingsOf(Model("  <custom>\n"
                       "    <text name=\"contactkit:solver\" data=\"lcp\"/>\n"
                       "    <text name=\"contactkit:erp\" data=\"0.25\"/>\n"
                       "    <text name=\"contactkit:max_pivots\" data=\"77\"/>\n"
                       "    <text name=\"contactkit:cfd_solimp\" data=\"0.1 0.8 0.02 0.5 2\"/>\n"
                       "    <text name=\"contactkit:soft_equality\" data=\"true\"/>\n"
                       "  </custom>\n" +
                       std::string(kScene)));
  const ckSettings numeric = SettingsOf(
      Model("  <custom>\n"
            "    <numeric name=\"contactkit:solver\" data=\"3\"/>\n"
            "    <numeric name=\"contactkit:erp\" data=\"0.25\"/>\n"
            "    <numeric name=\"contactkit:max_pivots\" data=\"77\"/>\n"
            "    <numeric name=\"contactkit:cfd_solimp\" size=\"5\" data=\"0.1 0.8 0.02 0.5 2\"/>\n"
            "    <numeric name=\"contactkit:soft_equality\" data=\"1\"/>\n"
            "  </custom>\n" +
            std::string(kScene)));
  EXPECT_EQ(tag.solver, ckSOL_LCP);
  EXPECT_EQ(tag.lcp.erp, 0.25);
  EXPECT_EQ(tag.lcp.max_pivots, 77);
  EXPECT_EQ(tag.deriv.cfd_solimp[1], 0.8);
  EXPECT_EQ(tag.ipm.soft_equality, 1);
  EXPECT_EQ(std::memcmp(&tag, &text, sizeof(ckSettings)), 0);
  EXPECT_EQ(std::memcmp(&tag, &numeric, sizeof(ckSettings)), 0);
}

TEST_F(LoaderTest, TagAndCustomFieldsCombine) {
  const ckSettings s = SettingsOf(Model(
      Tag(Config("solver", "comfree")) +
      "  <custom><numeric name=\"contactkit:stiffness\" data=\"0.5\"/>\n"
      "    <text name=\"contactkit:damping\" data=\"0.01\"/>\n"
      "    <text name=\"unrelated\" data=\"x\"/><numeric name=\"other\" data=\"1\"/></custom>\n" +
      kScene));
  EXPECT_EQ(s.solver, ckSOL_COMFREE);
  EXPECT_EQ(s.comfree.stiffness, 0.5);
  EXPECT_EQ(s.comfree.damping, 0.01);
}

TEST_F(LoaderTest, ModelWithoutSettingsGivesDefaults) {
  const ckSettings s = SettingsOf(Model(kScene), 0);
  ckSettings defaults;
  ck_defaultSettings(&defaults);
  EXPECT_EQ(std::memcmp(&s, &defaults, sizeof(ckSettings)), 0);
  EXPECT_EQ(s.solver, ckSOL_MUJOCO);

  // an instance without configs is allowed and also gives the defaults
  const ckSettings t = SettingsOf(Model(Tag("") + kScene), 0);
  EXPECT_EQ(std::memcmp(&t, &defaults, sizeof(ckSettings)), 0);
}

TEST_F(LoaderTest, MakeTakesSettingsFromTheModel) {
  ModelPtr m = LoadString(Model(Tag(Config("solver", "mujoco") + Config("warmstart", "0") +
                                    Config("kappa_tol", "1e-9") + Config("facets", "12") +
                                    Config("restitution", "0.5")) +
                                kScene));
  ASSERT_TRUE(m);
  HandlePtr ck = Make(m.get());
  ASSERT_TRUE(ck);
  ckSettings s;
  ck_getSettings(ck.get(), &s);
  EXPECT_EQ(s.solver, ckSOL_MUJOCO);
  EXPECT_EQ(s.warmstart, 0);
  EXPECT_EQ(s.ipm.kappa_tol, 1e-9);
  EXPECT_EQ(s.comfree.facets, 12);
  EXPECT_EQ(s.lcp.restitution, 0.5);
  EXPECT_EQ(ck_stats(ck.get())->solver, ckSOL_MUJOCO);
}

TEST_F(LoaderTest, MakeWithATagSolverNeedsItImplemented) {
  for (const int solver : {ckSOL_IPM, ckSOL_COMFREE, ckSOL_LCP}) {
    ModelPtr m = LoadString(Model(Tag(Config("solver", ck_solverName(solver))) + kScene));
    ASSERT_TRUE(m);
    char error[1024] = "";
    HandlePtr ck(ck_make(m.get(), nullptr, error, sizeof(error)));
    if (ck_solverAvailable(solver)) {
      ASSERT_TRUE(ck) << error;
      EXPECT_EQ(ck_stats(ck.get())->solver, solver);
    } else {
      EXPECT_FALSE(ck);
      EXPECT_NE(std::string(error).find("not implemented"), std::string::npos) << error;
      EXPECT_NE(std::string(error).find(ck_solverName(solver)), std::string::npos) << error;
    }
  }
}

//---------------------------------- bad input -----------------------------------------------------

struct BadCase {
  const char* name;
  std::string xml;
  std::vector<std::string> fragments;  // each must appear in the message
  int line;                            // the message must point at it (0: no line expected)
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadInputTest : public LoaderTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(BadInputTest, FailsWithAClearMessage) {
  const BadCase& c = GetParam();
  const std::string msg = LoadError(c.xml);
  RecordProperty("message", msg);
  for (const std::string& f : c.fragments) {
    EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
  if (c.line) {
    EXPECT_TRUE(HasLine(msg, c.line)) << "line " << c.line << " not in: " << msg;
  }
}

// line numbers below count from "<mujoco>" on line 1; the tag's <config> lines are 5, 6, ...
std::vector<BadCase> BadCases() {
  const std::string scene = kScene;
  std::vector<BadCase> cases = {
      {"UnknownSolver", Model(Tag(Config("solver", "pgs")) + scene), {"solver", "pgs", "ipm"}, 5},
      {"UnknownKey",
       Model(Tag(Config("solver", "ipm") + Config("kapa_tol", "1e-8")) + scene),
       {"kapa_tol", "kappa_tol", "residual_tol"},
       6},
      {"OutOfRange",
       Model(Tag(Config("kappa_tol", "2")) + scene),
       {"kappa_tol", "'2'", "allowed"},
       5},
      {"NotANumber",
       Model(Tag(Config("solver", "ipm") + Config("max_iter", "many")) + scene),
       {"max_iter", "many", "allowed"},
       6},
      {"NotANumberSuffix",
       Model(Tag(Config("kappa_tol", "1e-8x")) + scene),
       {"kappa_tol", "1e-8x", "allowed"},
       5},
      {"OddFacets", Model(Tag(Config("facets", "5")) + scene), {"facets", "'5'", "allowed"}, 5},
      {"KappaOrder",
       Model(Tag(Config("kappa_tol", "1e-6") + Config("kappa_grad", "1e-7")) + scene),
       {"kappa_grad", "kappa_tol", "allowed", "plugin tag"},
       0},
      {"ConfigWithoutKey",
       Model(Tag("        <config value=\"ipm\"/>\n") + scene),
       {"config", "key"},
       5},
      {"ConfigWithoutValue",
       Model(Tag("        <config key=\"solver\"/>\n") + scene),
       {"config", "value"},
       5},
      {"DuplicateKey",
       Model(Tag(Config("solver", "ipm") + Config("kappa_tol", "1e-8") + Config("solver", "lcp")) +
             scene),
       {"solver"},
       7},
      {"ExtensionNotAtTop",
       "<mujoco>\n"
       "  <worldbody>\n"
       "    <extension><plugin plugin=\"contactkit.solver\"/></extension>\n"
       "  </worldbody>\n"
       "</mujoco>\n",
       {"extension"},
       3},
      {"OtherPlugin",
       Model("  <extension>\n"
             "    <plugin plugin=\"mujoco.elasticity.cable\"/>\n"
             "  </extension>\n" +
             scene),
       {"mujoco.elasticity.cable"},
       3},
      {"InstanceWithoutName",
       Model("  <extension>\n"
             "    <plugin plugin=\"contactkit.solver\">\n"
             "      <instance>\n" +
             Config("solver", "ipm") +
             "      </instance>\n"
             "    </plugin>\n"
             "  </extension>\n" +
             scene),
       {"instance", "name"},
       4},
      {"TwoInstances",
       Model("  <extension>\n"
             "    <plugin plugin=\"contactkit.solver\">\n"
             "      <instance name=\"first\">\n" +
             Config("solver", "ipm") +
             "      </instance>\n"
             "      <instance name=\"second\">\n" +
             Config("solver", "lcp") +
             "      </instance>\n"
             "    </plugin>\n"
             "  </extension>\n" +
             scene),
       {"first", "second", "one"},
       7},
      {"ConfigOutsideInstance",
       Model("  <extension>\n"
             "    <plugin plugin=\"contactkit.solver\">\n" +
             Config("solver", "ipm") +
             "    </plugin>\n"
             "  </extension>\n" +
             scene),
       {"config"},
       4},
      {"BodyReferencesInstance",
       Model(Tag(Config("solver", "ipm")) +
             "  <worldbody>\n"
             "    <body><plugin instance=\"contact\"/><freejoint/><geom size=\".1\"/></body>\n"
             "  </worldbody>\n"),
       {"plugin"},
       10},
      {"ActuatorReferencesInstance",
       Model(Tag(Config("solver", "ipm")) +
             "  <worldbody><body><joint name=\"j\"/><geom size=\".1\"/></body></worldbody>\n"
             "  <actuator>\n"
             "    <plugin instance=\"contact\" joint=\"j\"/>\n"
             "  </actuator>\n"),
       {"plugin", "actuator"},
       11},
      {"SensorReferencesInstance",
       Model(Tag(Config("solver", "ipm")) +
             "  <worldbody><body><joint name=\"j\"/><geom size=\".1\"/></body></worldbody>\n"
             "  <sensor>\n"
             "    <plugin instance=\"contact\"/>\n"
             "  </sensor>\n"),
       {"plugin", "sensor"},
       11},
      // malformed XML: the line of the error, not where the open element (or the file) began
      {"MalformedXml",
       Model(Tag(Config("solver", "ipm")) + "  <worldbody>\n"
                                            "    <body><geom size=\".1\"/>\n"
                                            "  </worldbody>\n"),
       {"malformed XML", "</worldbody> does not match <body> opened at line 10"},
       11},
      {"MalformedXmlWithoutTag",
       Model(scene + "  <worldbody>\n"
                     "    <body><geom size=\".1\"/>\n"
                     "  </worldbody>\n"),
       {"malformed XML", "</worldbody> does not match <body> opened at line 10"},
       11},
      {"MalformedStrayClose",
       Model(scene + "  <worldbody>\n"
                     "    <geom size=\".1\"/>\n"
                     "    </body>\n"
                     "  </worldbody>\n"),
       {"malformed XML", "</body> does not match <worldbody> opened at line 9"},
       11},
      {"MalformedRootNotClosed",
       "<mujoco>\n" + scene + "  <worldbody>\n    <geom size=\".1\"/>\n  </worldbody>\n",
       {"malformed XML", "end of file with <mujoco> opened at line 1 still open"},
       11},
      {"MalformedTagNotClosed",
       Model(scene + "  <worldbody>\n"
                     "    <geom size=\".1\" type=\"sphere\"\n"
                     "  </worldbody>\n"),
       {"malformed XML", "<geom is not closed by '>'"},
       10},
      {"BadCustomText",
       Model("  <custom>\n"
             "    <text name=\"contactkit:solver\" data=\"ipm\"/>\n"
             "    <text name=\"contactkit:kappa_tol\" data=\"abc\"/>\n"
             "  </custom>\n" +
             scene),
       {"<custom><text name=\"contactkit:kappa_tol\">", "abc", "allowed"},
       4},
      {"BadCustomNumeric",
       Model("  <custom>\n"
             "    <numeric name=\"contactkit:max_iter\" data=\"2.5\"/>\n"
             "  </custom>\n" +
             scene),
       {"<custom><numeric name=\"contactkit:max_iter\">", "2.5", "allowed"},
       3},
      {"UnknownCustomKey",
       Model("  <custom>\n"
             "    <text name=\"contactkit:sovler\" data=\"ipm\"/>\n"
             "  </custom>\n" +
             scene),
       {"sovler", "known settings", "solver"},
       3},
      {"CustomTwice",
       Model("  <custom>\n"
             "    <numeric name=\"contactkit:erp\" data=\"0.5\"/>\n"
             "    <text name=\"contactkit:erp\" data=\"0.4\"/>\n"
             "  </custom>\n" +
             scene),
       {"erp", "twice"},
       0},
      {"TagAndCustom",
       Model(Tag(Config("solver", "ipm") + Config("erp", "0.5")) +
             "  <custom>\n"
             "    <text name=\"contactkit:erp\" data=\"0.4\"/>\n"
             "  </custom>\n" +
             scene),
       {"erp", "plugin tag", "given"},
       11},
  };
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Loader, BadInputTest, ::testing::ValuesIn(BadCases()),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return std::string(info.param.name);
                         });

// MuJoCo 2.x only: 3.x loads other plugins itself
#if !CK_TEST_MJ3
TEST_F(LoaderTest, MuJoCo2MessagesSayWhatIsUnderstood) {
  const std::string other = LoadError(
      Model("  <extension><plugin plugin=\"mujoco.pid\"/></extension>\n" + std::string(kScene)));
  EXPECT_NE(other.find("no plugin support"), std::string::npos) << other;
  EXPECT_NE(other.find("contactkit.solver"), std::string::npos) << other;
  const std::string body = LoadError(
      Model("  <worldbody><body><plugin instance=\"x\"/><geom size=\".1\"/></body></worldbody>\n"));
  EXPECT_NE(body.find("no plugin support"), std::string::npos) << body;
  EXPECT_NE(body.find("<body>"), std::string::npos) << body;
}
#endif

TEST_F(LoaderTest, CustomTextTwiceIsAnError) {
  const std::string msg =
      LoadError(Model("  <custom>\n"
                      "    <text name=\"contactkit:erp\" data=\"0.5\"/>\n"
                      "    <text name=\"contactkit:erp\" data=\"0.4\"/>\n"
                      "  </custom>\n" +
                      std::string(kScene)));
  EXPECT_NE(msg.find("contactkit:erp"), std::string::npos) << msg;
}

TEST_F(LoaderTest, MissingFile) {
  char error[1024] = "";
  mjModel* m = ck_loadXML("/nonexistent/ck_missing.xml", nullptr, error, sizeof(error));
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(error).find("ck_missing.xml"), std::string::npos) << error;
  EXPECT_EQ(ck_loadXML("/nonexistent/ck_missing.xml", nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(ck_loadXML(nullptr, nullptr, error, sizeof(error)), nullptr);
  EXPECT_NE(std::string(error).find("filename"), std::string::npos) << error;
}

TEST_F(LoaderTest, SmallErrorBufferIsTruncatedNotOverrun) {
  TempDir dir;
  const std::string path = dir.Write("bad.xml", Model(Tag(Config("solver", "pgs")) + kScene));
  char error[16];
  std::memset(error, 'x', sizeof(error));
  EXPECT_EQ(ck_loadXML(path.c_str(), nullptr, error, 8), nullptr);
  EXPECT_EQ(std::strlen(error), 7u);
  EXPECT_EQ(error[8], 'x');
}

// settings checked again at ck_make name where a bad value came from
TEST_F(LoaderTest, MakeNamesTheSourceOfABadValue) {
  TempDir dir;
  const std::string path = dir.Write(
      "custom.xml", Model("  <custom><text name=\"contactkit:kappa_tol\" data=\"-1\"/></custom>\n" +
                          std::string(kScene)));
  char error[1024] = "";
  ModelPtr m(mj_loadXML(path.c_str(), nullptr, error, sizeof(error)));
  ASSERT_TRUE(m) << error;
  EXPECT_EQ(ck_make(m.get(), nullptr, error, sizeof(error)), nullptr);
  EXPECT_NE(std::string(error).find("<custom><text name=\"contactkit:kappa_tol\">"),
            std::string::npos)
      << error;
  EXPECT_NE(std::string(error).find("allowed"), std::string::npos) << error;

#if CK_TEST_MJ3
  // MuJoCo 3.x: plain mj_loadXML keeps a bad tag value, and ck_make names the tag
  const std::string tag = dir.Write("tag.xml", Model(Tag(Config("kappa_tol", "-1")) + kScene));
#else
  // MuJoCo 2.x: the fields that ck_loadXML makes from the tag are named as the tag
  const std::string tag = dir.Write(
      "tag.xml",
      Model("  <custom><text name=\"contactkit:kappa_tol\" data=\"-1\"/>\n"
            "    <text name=\"contactkit.plugin\" data=\"contact|kappa_tol\"/></custom>\n" +
            std::string(kScene)));
#endif
  ModelPtr t(mj_loadXML(tag.c_str(), nullptr, error, sizeof(error)));
  ASSERT_TRUE(t) << error;
  EXPECT_EQ(ck_make(t.get(), nullptr, error, sizeof(error)), nullptr);
  EXPECT_NE(
      std::string(error).find("plugin tag <instance name=\"contact\"> <config key=\"kappa_tol\">"),
      std::string::npos)
      << error;
}

//---------------------------------- rewriting the file --------------------------------------------

TEST_F(LoaderTest, MuJoCoErrorsKeepTheirLineNumbers) {
  // the tag spans lines 2-9; MuJoCo's own error on line 12 must still say line 12
  const std::string msg = LoadError(Model(Tag(Config("solver", "ipm") + Config("erp", "0.5")) +
                                          "  <worldbody>\n"
                                          "    <geom type=\"plane\" size=\"1 1 .1\"/>\n"
                                          "    <geom type=\"sphere\" size=\"-1\" bogus=\"1\"/>\n"
                                          "  </worldbody>\n"));
  EXPECT_TRUE(HasLine(msg, 12)) << msg;
}

TEST_F(LoaderTest, CommentsAndEmptyExtensionsAreHandled) {
  const ckSettings s = SettingsOf(
      "<mujoco>\n"
      "  <!-- an old tag: <extension><plugin plugin=\"x\"/></extension> -->\n"
      "  <extension/>\n"
      "  <extension>\n"
      "    <plugin plugin=\"contactkit.solver\">\n"
      "      <!-- <config key=\"solver\" value=\"lcp\"/> -->\n"
      "      <instance name=\"a &amp; b\">\n"
      "        <config key=\"solver\" value=\"comfree\"/>\n"
      "      </instance>\n"
      "    </plugin>\n"
      "  </extension>\n" +
      std::string(kScene) + "</mujoco>\n");
  EXPECT_EQ(s.solver, ckSOL_COMFREE);
}

// the model with the tag steps bit for bit like the model without it
TEST_F(LoaderTest, TagChangesNothingInThePhysics) {
  TempDir dir;
  const std::string plain = dir.Write("plain.xml", Model(kScene));
  const std::string tagged = dir.Write(
      "tagged.xml", Model(Tag(Config("solver", "ipm") + Config("kappa_tol", "1e-8")) + kScene));
  char error[1024] = "";
  ModelPtr m1(mj_loadXML(plain.c_str(), nullptr, error, sizeof(error)));
  ASSERT_TRUE(m1) << error;
  ModelPtr m2 = Load(tagged);
  ASSERT_TRUE(m2);
  ASSERT_EQ(m1->nq, m2->nq);
  ASSERT_EQ(m1->nv, m2->nv);
  ASSERT_EQ(m1->ngeom, m2->ngeom);
  DataPtr d1(mj_makeData(m1.get())), d2(mj_makeData(m2.get()));
  int max_ncon = 0;
  for (int t = 0; t < 400; t++) {
    mj_step(m1.get(), d1.get());
    mj_step(m2.get(), d2.get());
    ASSERT_EQ(std::memcmp(d1->qpos, d2->qpos, sizeof(mjtNum) * m1->nq), 0) << "step " << t;
    ASSERT_EQ(std::memcmp(d1->qvel, d2->qvel, sizeof(mjtNum) * m1->nv), 0) << "step " << t;
    ASSERT_EQ(std::memcmp(d1->qacc, d2->qacc, sizeof(mjtNum) * m1->nv), 0) << "step " << t;
    ASSERT_EQ(d1->ncon, d2->ncon) << "step " << t;
    max_ncon = std::max(max_ncon, d1->ncon);
  }
  EXPECT_GT(max_ncon, 0) << "the comparison should include contacts";
  ExpectNoDataWarnings(d2.get());
}

//---------------------------------- includes, assets, VFS -----------------------------------------

// a tetrahedron as Wavefront OBJ
const char kTetrahedron[] =
    "v 0 0 0\nv .1 0 0\nv 0 .1 0\nv 0 0 .1\n"
    "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n";

// a model in a folder: main.xml includes sub/part.xml (bodies) and uses assets/tet.obj; returns
// the path of main.xml, or with write false its text
std::string WriteIncludeModel(TempDir* dir, const std::string& main_extra,
                              const std::string& settings_xml = "", bool write = true) {
  dir->Write("assets/tet.obj", kTetrahedron);
  dir->Write("sub/part.xml",
             "<mujoco>\n"
             "  <body name=\"part\" pos=\"1 0 .5\"><freejoint/>\n"
             "    <geom type=\"mesh\" mesh=\"tet\"/></body>\n"
             "</mujoco>\n");
  if (!settings_xml.empty()) dir->Write("sub/settings.xml", settings_xml);
  const std::string text =
      "<mujoco model=\"included\">\n"
      "  <compiler meshdir=\"assets\"/>\n" +
      main_extra +
      "  <asset><mesh name=\"tet\" file=\"tet.obj\"/></asset>\n"
      "  <worldbody>\n"
      "    <geom type=\"plane\" size=\"2 2 .1\"/>\n"
      "    <include file=\"sub/part.xml\"/>\n"
      "  </worldbody>\n"
      "</mujoco>\n";
  return write ? dir->Write("main.xml", text) : text;
}

TEST_F(LoaderTest, IncludesAndMeshesResolveFromTheModelFolder) {
  TempDir dir;
  const std::string main =
      WriteIncludeModel(&dir, Tag(Config("solver", "lcp") + Config("erp", "0.3")));
  ModelPtr m = Load(main);
  ASSERT_TRUE(m);
  EXPECT_GE(mj_name2id(m.get(), mjOBJ_BODY, "part"), 0);
  ASSERT_EQ(m->nmesh, 1);
  EXPECT_GE(m->mesh_vertnum[0], 4);

  // the same model without the tag, loaded by MuJoCo alone, has the same mesh and masses
  const std::string plain = dir.Write("plain.xml", WriteIncludeModel(&dir, "", "", false));
  char error[1024] = "";
  ModelPtr p(mj_loadXML(plain.c_str(), nullptr, error, sizeof(error)));
  ASSERT_TRUE(p) << error;
  ASSERT_EQ(p->nmeshvert, m->nmeshvert);
  EXPECT_EQ(std::memcmp(p->mesh_vert, m->mesh_vert, sizeof(float) * 3 * m->nmeshvert), 0);
  ASSERT_EQ(p->nbody, m->nbody);
  EXPECT_EQ(std::memcmp(p->body_mass, m->body_mass, sizeof(mjtNum) * m->nbody), 0);
  EXPECT_GT(m->body_mass[mj_name2id(m.get(), mjOBJ_BODY, "part")], 0);

  ckSettings s;
  ASSERT_EQ(ck_settingsFromModel(m.get(), &s, nullptr, 0), 1);
  EXPECT_EQ(s.solver, ckSOL_LCP);
  EXPECT_EQ(s.lcp.erp, 0.3);
}

TEST_F(LoaderTest, TagInAnIncludedFile) {
  TempDir dir;
  const std::string main =
      WriteIncludeModel(&dir, "  <include file=\"sub/settings.xml\"/>\n",
                        Model(Tag(Config("solver", "comfree") + Config("facets", "6"))));
  ModelPtr m = Load(main);
  ASSERT_TRUE(m);
  EXPECT_GE(mj_name2id(m.get(), mjOBJ_BODY, "part"), 0);
  EXPECT_EQ(m->nmesh, 1);
  ckSettings s;
  ASSERT_EQ(ck_settingsFromModel(m.get(), &s, nullptr, 0), 1);
  EXPECT_EQ(s.solver, ckSOL_COMFREE);
  EXPECT_EQ(s.comfree.facets, 6);
}

TEST_F(LoaderTest, BadTagInAnIncludedFileNamesThatFile) {
  TempDir dir;
  const std::string main = WriteIncludeModel(&dir, "  <include file=\"sub/settings.xml\"/>\n",
                                             Model(Tag(Config("facets", "7"))));
  char error[1024] = "";
  ModelPtr m(ck_loadXML(main.c_str(), nullptr, error, sizeof(error)));
  EXPECT_FALSE(m);
  EXPECT_NE(std::string(error).find("facets"), std::string::npos) << error;
#if !CK_TEST_MJ3
  // MuJoCo 3.x reports where the instance is only by name
  EXPECT_NE(std::string(error).find("settings.xml:5:"), std::string::npos) << error;
#endif
}

TEST_F(LoaderTest, MissingIncludeIsReported) {
  TempDir dir;
  const std::string main = dir.Write(
      "main.xml", Model(Tag(Config("solver", "ipm")) + "  <include file=\"nothere.xml\"/>\n"));
  char error[1024] = "";
  ModelPtr m(ck_loadXML(main.c_str(), nullptr, error, sizeof(error)));
  EXPECT_FALSE(m);
  EXPECT_NE(std::string(error).find("nothere.xml"), std::string::npos) << error;
}

TEST_F(LoaderTest, UserVfsHoldsTheModel) {
  VfsPtr vfs = MakeVfs();
  AddToVfs(vfs.get(), "ck_vfs_part.xml",
           "<mujoco><body name=\"part\" pos=\"0 0 .3\"><freejoint/><geom size=\".1\"/></body>"
           "</mujoco>\n");
  AddToVfs(vfs.get(), "ck_vfs_model.xml",
           Model(Tag(Config("solver", "ipm") + Config("kappa_tol", "1e-7")) +
                 "  <worldbody><geom type=\"plane\" size=\"1 1 .1\"/>\n"
                 "    <include file=\"ck_vfs_part.xml\"/></worldbody>\n"));
  ASSERT_FALSE(FileExists("ck_vfs_model.xml"));
  char error[1024] = "";
  ModelPtr m(ck_loadXML("ck_vfs_model.xml", vfs.get(), error, sizeof(error)));
  ASSERT_TRUE(m) << error;
  EXPECT_GE(mj_name2id(m.get(), mjOBJ_BODY, "part"), 0);
  ckSettings s;
  ASSERT_EQ(ck_settingsFromModel(m.get(), &s, nullptr, 0), 1);
  EXPECT_EQ(s.solver, ckSOL_IPM);
  EXPECT_EQ(s.ipm.kappa_tol, 1e-7);

  // the user's VFS is unchanged and still loads through ck_loadXML
  ModelPtr again(ck_loadXML("ck_vfs_model.xml", vfs.get(), error, sizeof(error)));
  EXPECT_TRUE(again) << error;
}

// MuJoCo 2.x only: 3.x reads the files itself
#if !CK_TEST_MJ3
TEST_F(LoaderTest, MuJoCo2SameBaseNameAsARewrittenFileIsReported) {
  TempDir dir;
  dir.Write("sub/main.xml", "<mujoco><body name=\"b\"><geom size=\".1\"/></body></mujoco>\n");
  const std::string main =
      dir.Write("main.xml", Model(Tag(Config("solver", "ipm")) +
                                  "  <worldbody><include file=\"sub/main.xml\"/></worldbody>\n"));
  char error[1024] = "";
  ModelPtr m(ck_loadXML(main.c_str(), nullptr, error, sizeof(error)));
  EXPECT_FALSE(m);
  EXPECT_NE(std::string(error).find("base name"), std::string::npos) << error;
}
#endif

//---------------------------------- MuJoCo 3.x: a registered plugin
//--------------------------------

// MuJoCo 3.x only: 2.x has no plugins
#if CK_TEST_MJ3
TEST_F(LoaderTest, PlainMjLoadXMLAcceptsTheTagOnMuJoCo3) {
  int slot = -1;
  ASSERT_NE(mjp_getPlugin("contactkit.solver", &slot), nullptr) << "not registered at load time";
  TempDir dir;
  const std::string path =
      dir.Write("tag.xml", Model(Tag(Config("solver", "lcp") + Config("cfm", "1e-6")) + kScene));
  char error[1024] = "";
  ModelPtr m(mj_loadXML(path.c_str(), nullptr, error, sizeof(error)));
  ASSERT_TRUE(m) << error;
  ASSERT_EQ(m->nplugin, 1);
  EXPECT_EQ(m->plugin[0], slot);
  EXPECT_STREQ(mj_getPluginConfig(m.get(), 0, "solver"), "lcp");
  ckSettings s;
  ASSERT_EQ(ck_settingsFromModel(m.get(), &s, error, sizeof(error)), 1) << error;
  EXPECT_EQ(s.solver, ckSOL_LCP);
  EXPECT_EQ(s.lcp.cfm, 1e-6);
}
#endif

}  // namespace
}  // namespace contactkit::test
