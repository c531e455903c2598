// Copyright 2026 The contactkit developers.
//
// ck_loadXML: MJCF with the contactkit plugin tag on every MuJoCo version.
//
// MuJoCo 3.x: "contactkit.solver" is registered as an engine plugin without capabilities that only
// holds configuration, when the library is loaded and again (idempotently) in ck_loadXML.
//
// MuJoCo 2.x has no plugins and rejects <extension>. The model's include tree is read and checked
// with tinyxml2; each <extension> is cut out of the file's text (its newlines kept, so MuJoCo's own
// messages keep their line numbers), the instance's keys become <custom><text> fields in its place,
// and MuJoCo reads the rewritten files from a VFS under the original path, so that includes and
// mesh, texture and hfield files still resolve from the model's directory on disk.
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/config/settings_table.h"
#include "plugin/step/compat.h"

#if !CK_MJ3
#include <tinyxml2.h>
#endif

namespace contactkit {
namespace {

// a file of the model as text, to point messages at lines
struct SourceText {
  std::string path;  // as MuJoCo opens it
  std::string text;  // contents
};

std::string KnownKeys() {
  int n;
  const KeyInfo* keys = SettingKeys(&n);
  std::string list;
  for (int i = 0; i < n; i++) list += (i ? ", " : "") + std::string(keys[i].name);
  return list;
}

// read a file from disk; false if it cannot be read
bool ReadDisk(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  text->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

// 1-based line of position pos in text
int LineOf(const std::string& text, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < text.size(); i++) line += text[i] == '\n';
  return line;
}

// The first place where text is not well-formed XML that the parser's own line misses (it gives
// the line where the unclosed element opened, or the root's): "line: what", or "" if none found.
// Finds a closing tag that does not match the open element or closes none, a tag or comment
// left open, and elements still open at the end of the file.
std::string FindMalformed(const std::string& text) {
  struct Open {
    std::string name;
    int line;
  };
  std::vector<Open> open;
  auto at = [&](size_t pos, const std::string& what) {
    return std::to_string(LineOf(text, pos)) + ": " + what;
  };
  size_t i = 0;
  while ((i = text.find('<', i)) != std::string::npos) {
    // comments, CDATA, declarations and processing instructions
    const std::pair<const char*, const char*> skips[] = {
        {"<!--", "-->"}, {"<![CDATA[", "]]>"}, {"<?", "?>"}, {"<!", ">"}};
    bool skipped = false;
    for (const auto& [begin, end] : skips) {
      if (text.compare(i, std::strlen(begin), begin) != 0) continue;
      const size_t e = text.find(end, i + std::strlen(begin));
      if (e == std::string::npos) return at(i, std::string(begin) + " is never closed");
      i = e + std::strlen(end);
      skipped = true;
      break;
    }
    if (skipped) continue;
    // the tag's end, outside quoted attribute values
    size_t j = i + 1;
    char quote = 0;
    for (; j < text.size(); j++) {
      const char c = text[j];
      if (quote) {
        quote = c == quote ? 0 : quote;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>' || c == '<') {
        break;
      }
    }
    const bool closing = j > i + 1 && text[i + 1] == '/';
    size_t n = i + 1 + closing;
    while (n < j && !std::isspace(static_cast<unsigned char>(text[n])) && text[n] != '/' &&
           text[n] != '>') {
      n++;
    }
    const std::string name = text.substr(i + 1 + closing, n - i - 1 - closing);
    if (j >= text.size() || text[j] == '<') {
      return at(i, "<" + std::string(closing ? "/" : "") + name + " is not closed by '>'" +
                       (quote ? " (an attribute's quote is open)" : ""));
    }
    if (closing) {
      if (open.empty()) return at(i, "</" + name + "> closes no open element");
      if (open.back().name != name) {
        return at(i, "</" + name + "> does not match <" + open.back().name + "> opened at line " +
                         std::to_string(open.back().line));
      }
      open.pop_back();
    } else if (text[j - 1] != '/') {
      open.push_back({name, LineOf(text, i)});
    }
    i = j + 1;
  }
  if (!open.empty()) {
    const size_t end = text.empty() || text.back() != '\n' ? text.size() : text.size() - 1;
    return at(end, "end of file with <" + open.back().name + "> opened at line " +
                       std::to_string(open.back().line) + " still open");
  }
  return "";
}

// a parser's malformed-XML message for path, pointed at the line of the error when FindMalformed
// finds it in text (else the parser's message as it is)
std::string MalformedMessage(const std::string& path, const std::string& text,
                             const std::string& parser_msg) {
  const std::string found = FindMalformed(text);
  if (found.empty()) return parser_msg;
  const size_t colon = found.find(": ");
  return path + ":" + found.substr(0, colon) + ": malformed XML: " + found.substr(colon + 2);
}

// the text between prefix and the next quote of msg, searching from the first (or last) prefix
std::string Quoted(const std::string& msg, const std::string& prefix, char quote, bool last) {
  const size_t at = last ? msg.rfind(prefix) : msg.find(prefix);
  if (at == std::string::npos) return "";
  const size_t begin = at + prefix.size();
  const size_t end = msg.find(quote, begin);
  return end == std::string::npos ? "" : msg.substr(begin, end - begin);
}

// "path:line: " of what a message is about (a plugin config, a <custom> field, an instance),
// found by its text in the model's files; empty if not found
std::string Locate(const std::string& msg, const std::vector<SourceText>& files) {
  std::vector<std::string> needles;
  if (msg.compare(0, std::strlen("plugin tag"), "plugin tag") == 0) {
    needles.push_back("key=\"" + Quoted(msg, "<config key=\"", '"', false) + "\"");
  }
  const std::string key = Quoted(msg, "setting '", '\'', false);
  if (!key.empty()) {
    needles.push_back("\"" + std::string(kCustomPrefix) + key + "\"");
    needles.push_back("key=\"" + key + "\"");
  }
  const std::string attribute = Quoted(msg, "unrecognized attribute 'plugin:", '\'', false);
  if (!attribute.empty()) needles.push_back("key=\"" + attribute + "\"");
  const std::string instance = Quoted(msg, "<instance name=\"", '"', true);
  if (!instance.empty()) needles.push_back("name=\"" + instance + "\"");
  for (const std::string& needle : needles) {
    for (const SourceText& f : files) {
      const size_t pos = f.text.find(needle);
      if (pos != std::string::npos) {
        return f.path + ":" + std::to_string(LineOf(f.text, pos)) + ": ";
      }
    }
  }
  return "";
}

// the main file from disk as the only source, if it can be read
std::vector<SourceText> MainSource(const std::string& filename) {
  std::vector<SourceText> files(1);
  files[0].path = filename;
  if (!ReadDisk(filename, &files[0].text)) files.clear();
  return files;
}

// check the settings of a loaded model; on bad settings free it and return null with a message
// pointing into files (read from disk when empty)
mjModel* CheckSettings(mjModel* m, const std::string& filename, std::vector<SourceText> files,
                       char* error, int error_sz) {
  ckSettings s;
  char err[2048];
  if (ck_settingsFromModel(m, &s, err, sizeof(err)) >= 0) return m;
  mj_deleteModel(m);
  if (files.empty()) files = MainSource(filename);
  const std::string where = Locate(err, files);
  SetError(error, error_sz, (where.empty() ? filename + ": " : where) + err);
  return nullptr;
}

#if CK_MJ3

//---------------------------------- MuJoCo 3.x: a registered plugin -------------------------------

int NumState(const mjModel* m, int instance) { return 0; }

// register contactkit.solver with every settings key as attribute; returns its slot
int RegisterSolverPlugin() {
  int slot = -1;
  if (mjp_getPlugin(kPluginName, &slot)) return slot;
  static const std::vector<const char*> attributes = [] {
    int n;
    const KeyInfo* keys = SettingKeys(&n);
    std::vector<const char*> names;
    for (int i = 0; i < n; i++) names.push_back(keys[i].name);
    return names;
  }();
  mjpPlugin plugin;
  mjp_defaultPlugin(&plugin);
  plugin.name = kPluginName;
  plugin.nattribute = static_cast<int>(attributes.size());
  plugin.attributes = attributes.data();
  plugin.capabilityflags = 0;
  plugin.nstate = NumState;
  return mjp_registerPlugin(&plugin);
}

// registered when the library is loaded, so that plain mj_loadXML accepts the tag
[[maybe_unused]] const int kPluginSlot = RegisterSolverPlugin();

mjModel* LoadXML(const char* filename, const mjVFS* vfs, char* error, int error_sz) {
  RegisterSolverPlugin();
  char err[2048] = "";
  mjModel* m = mj_loadXML(filename, vfs, err, sizeof(err));
  if (!m) {
    // MuJoCo points an unknown key at the <plugin>: point at the <config> and list known keys
    std::string msg = err;
    std::string text;
    if (msg.find("XML parse error") != std::string::npos && ReadDisk(filename, &text)) {
      msg = MalformedMessage(filename, text, msg);
    }
    if (msg.find("unrecognized attribute 'plugin:") != std::string::npos &&
        msg.find(kPluginName) != std::string::npos) {
      msg = Locate(msg, MainSource(filename)) + msg + "\nknown settings: " + KnownKeys();
    }
    SetError(error, error_sz, msg);
    return nullptr;
  }
  SetError(error, error_sz, err);  // MuJoCo's warnings, if any
  return CheckSettings(m, filename, {}, error, error_sz);
}

#else

//---------------------------------- MuJoCo 2.x: the tag rewritten ---------------------------------

using tinyxml2::XMLDocument;
using tinyxml2::XMLElement;

// MuJoCo's version as text ("2.2.2")
std::string MujocoVersion() {
  const int v = mj_version();
  return std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." + std::to_string(v % 10);
}

// file name without its directory, as MuJoCo's VFS stores it (lowercase)
std::string VfsName(const std::string& path) {
  const size_t slash = path.find_last_of("/\\");
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// directory part of a path including its final separator, as MuJoCo's mjuu_getfiledir
std::string FileDir(const std::string& path) {
  const size_t slash = path.find_last_of("/\\");
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// read a file as MuJoCo 2.x does: from the user's VFS by base name, else from disk
bool ReadModelFile(const std::string& path, const mjVFS* vfs, std::string* text) {
  const std::string name = VfsName(path);
  if (vfs && !name.empty() && name.size() < mjMAXVFSNAME) {
    const int id = mj_findFileVFS(vfs, path.c_str());
    if (id >= 0) {
      text->assign(static_cast<const char*>(vfs->filedata[id]), vfs->filesize[id]);
      return true;
    }
  }
  return ReadDisk(path, text);
}

// true if text has the element name at i (just after "<" or "</")
bool NameAt(const std::string& text, size_t i, const std::string& name) {
  if (text.compare(i, name.size(), name) != 0) return false;
  const size_t j = i + name.size();
  return j < text.size() &&
         (std::isspace(static_cast<unsigned char>(text[j])) || text[j] == '>' || text[j] == '/');
}

// index just after the first s at or after from, npos if there is none
size_t After(const std::string& text, const char* s, size_t from) {
  const size_t pos = text.find(s, from);
  return pos == std::string::npos ? pos : pos + std::strlen(s);
}

// index of the '>' that closes the tag starting at i, skipping quoted attribute values
size_t TagEnd(const std::string& text, size_t i) {
  char quote = 0;
  for (; i < text.size(); i++) {
    const char c = text[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      return i;
    }
  }
  return std::string::npos;
}

// [begin, end) of a piece of text
using Span = std::pair<size_t, size_t>;

// [begin, end) of each outermost element called name in XML text, skipping comments, CDATA and
// declarations; false if the text ends inside markup
bool ElementSpans(const std::string& text, const std::string& name, std::vector<Span>* spans) {
  int depth = 0;
  size_t begin = 0;
  size_t i = 0;
  while ((i = text.find('<', i)) != std::string::npos) {
    size_t next;  // index after this piece of markup
    if (text.compare(i, 4, "<!--") == 0) {
      next = After(text, "-->", i + 4);
    } else if (text.compare(i, 9, "<![CDATA[") == 0) {
      next = After(text, "]]>", i + 9);
    } else if (text.compare(i, 2, "<?") == 0) {
      next = After(text, "?>", i + 2);
    } else if (text.compare(i, 2, "<!") == 0) {
      next = After(text, ">", i + 2);
    } else {
      const size_t close = TagEnd(text, i);
      if (close == std::string::npos) return false;
      next = close + 1;
      if (text.compare(i, 2, "</") == 0) {
        if (NameAt(text, i + 2, name) && depth > 0 && --depth == 0) {
          spans->emplace_back(begin, next);
        }
      } else if (NameAt(text, i + 1, name)) {
        if (depth == 0) begin = i;
        if (text[close - 1] != '/') {
          depth++;
        } else if (depth == 0) {
          spans->emplace_back(begin, next);
        }
      }
    }
    if (next == std::string::npos) return false;
    i = next;
  }
  return depth == 0;
}

// text escaped for an XML attribute value
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// an MJCF file of the model's include tree
struct XmlFile {
  SourceText source;              // path as MuJoCo opens it, and the text
  XMLDocument doc;                // parsed text
  std::vector<XMLElement*> cuts;  // its <extension> elements, in document order
};

using XmlFilePtr = std::unique_ptr<XmlFile>;

// a file for MuJoCo's VFS
struct VfsFile {
  std::string name;  // base name, lowercase
  std::string text;  // contents
};

// one <config> of the instance, or one <custom> field "contactkit:<key>"
struct Setting {
  std::string key;    // settings key
  std::string value;  // value as written (configs only)
  std::string where;  // "path:line"
  std::string what;   // the element, as shown in messages
};

// reads and checks the include tree of a model with the plugin tag and loads the rewritten model
class TagRewriter {
 public:
  TagRewriter(const std::string& filename, const mjVFS* vfs)
      : filename_(filename), dir_(FileDir(filename)), vfs_(vfs) {}

  // read and check the model whose main file holds text; false with err on bad input
  bool Check(const std::string& text, std::string* err) {
    XmlFile* f = Add(filename_, text, err);
    if (!f) return false;
    const XMLElement* root = f->doc.RootElement();
    if (!root) return true;  // MuJoCo reports it
    const bool mujoco = strcasecmp(root->Name(), "mujoco") == 0;
    for (XMLElement* e = f->doc.RootElement()->FirstChildElement(); e;
         e = e->NextSiblingElement()) {
      if (!Visit(f, e, root->Name(), mujoco, err)) return false;
    }
    return CheckRepeats(err);
  }

  // true if some file has an <extension> to rewrite
  bool HasTag() const {
    for (const auto& f : files_) {
      if (!f->cuts.empty()) return true;
    }
    return false;
  }

  // load the rewritten model through a VFS; null with a message on error
  mjModel* Load(char* error, int error_sz) {
    std::string err;
    std::vector<VfsFile> rewritten;
    for (const auto& f : files_) {
      if (f->cuts.empty()) continue;
      std::string text;
      if (!Rewrite(*f, &text, &err) || !CheckVfsName(*f, &err)) {
        SetError(error, error_sz, err);
        return nullptr;
      }
      rewritten.push_back({VfsName(f->source.path), std::move(text)});
    }

    // MuJoCo 2.x's mjVFS is 2 MB: keep it off the stack
    struct VfsDeleter {
      void operator()(mjVFS* vfs) const {
        mj_deleteVFS(vfs);
        delete vfs;
      }
    };
    std::unique_ptr<mjVFS, VfsDeleter> vfs(new mjVFS);
    mj_defaultVFS(vfs.get());
    if (vfs_) {
      for (int i = 0; i < vfs_->nfile; i++) {
        bool replaced = false;
        for (const auto& r : rewritten) replaced = replaced || r.name == vfs_->filename[i];
        if (replaced) continue;
        if (!AddVfs(vfs.get(), vfs_->filename[i], vfs_->filedata[i], vfs_->filesize[i], &err)) {
          SetError(error, error_sz, err);
          return nullptr;
        }
      }
    }
    for (const auto& r : rewritten) {
      if (!AddVfs(vfs.get(), r.name, r.text.data(), static_cast<int>(r.text.size()), &err)) {
        SetError(error, error_sz, err);
        return nullptr;
      }
    }
    return mj_loadXML(filename_.c_str(), vfs.get(), error, error_sz);
  }

  // the texts of all files, to point messages at lines
  std::vector<SourceText> Sources() const {
    std::vector<SourceText> out;
    for (const auto& f : files_) out.push_back(f->source);
    return out;
  }

 private:
  // "path:line" of an element
  static std::string Where(const XmlFile* f, const XMLElement* e) {
    return f->source.path + ":" + std::to_string(e->GetLineNum());
  }

  // parse and keep a file; null with err if it is malformed
  XmlFile* Add(const std::string& path, const std::string& text, std::string* err) {
    files_.push_back(std::make_unique<XmlFile>());
    XmlFile* f = files_.back().get();
    f->source = {path, text};
    if (f->doc.Parse(text.data(), text.size()) != tinyxml2::XML_SUCCESS) {
      *err = MalformedMessage(path, text,
                              path + ":" + std::to_string(f->doc.ErrorLineNum()) +
                                  ": malformed XML: " + f->doc.ErrorStr());
      return nullptr;
    }
    return f;
  }

  // check element e of file f whose parent (after includes) is called parent; top: the parent is
  // the model's <mujoco>
  bool Visit(XmlFile* f, XMLElement* e, const std::string& parent, bool top, std::string* err) {
    const char* name = e->Name();
    if (strcasecmp(name, "include") == 0) return VisitInclude(f, e, parent, top, err);
    if (std::strcmp(name, "extension") == 0) return VisitExtension(f, e, parent, top, err);
    if (std::strcmp(name, "plugin") == 0) {
      const char* instance = e->Attribute("instance");
      *err = Where(f, e) + ": <plugin" +
             (instance ? " instance=\"" + std::string(instance) + "\"" : std::string()) +
             "> inside <" + parent + ">: MuJoCo " + MujocoVersion() +
             " has no plugin support, and " + kPluginName +
             " is configured in <extension> alone, not referenced from bodies, actuators or "
             "sensors; allowed: <plugin> only inside <extension>";
      return false;
    }
    if (std::strcmp(name, "custom") == 0) RecordCustom(f, e);
    for (XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      if (!Visit(f, c, name, false, err)) return false;
    }
    return true;
  }

  // an <include>: its file's top-level elements take its place under parent
  bool VisitInclude(XmlFile* f, XMLElement* e, const std::string& parent, bool top,
                    std::string* err) {
    const char* file = e->Attribute("file");
    if (!file) return true;  // MuJoCo reports it
    const std::string path = dir_ + file;
    for (const auto& g : files_) {
      if (strcasecmp(g->source.path.c_str(), path.c_str()) == 0) return true;  // MuJoCo reports it
    }
    std::string text;
    if (!ReadModelFile(path, vfs_, &text)) {
      *err = Where(f, e) + ": <include file=\"" + file + "\">: cannot read '" + path + "'" +
             (vfs_ ? " (not in the VFS, not on disk)" : "");
      return false;
    }
    XmlFile* g = Add(path, text, err);
    if (!g) return false;
    const XMLElement* root = g->doc.RootElement();
    if (!root) return true;  // MuJoCo reports it
    for (XMLElement* c = g->doc.RootElement()->FirstChildElement(); c;
         c = c->NextSiblingElement()) {
      if (!Visit(g, c, parent, top, err)) return false;
    }
    return true;
  }

  // <extension>: only <plugin plugin="contactkit.solver"> with <instance> children
  bool VisitExtension(XmlFile* f, XMLElement* e, const std::string& parent, bool top,
                      std::string* err) {
    const std::string allowed = std::string("; allowed: <plugin plugin=\"") + kPluginName + "\">";
    if (!top) {
      *err = Where(f, e) + ": <extension> is inside <" + parent +
             ">; allowed: <extension> as a direct child of <mujoco>";
      return false;
    }
    f->cuts.push_back(e);
    for (XMLElement* p = e->FirstChildElement(); p; p = p->NextSiblingElement()) {
      if (std::strcmp(p->Name(), "plugin") != 0) {
        *err = Where(f, p) + ": <" + p->Name() + "> inside <extension>" + allowed;
        return false;
      }
      const char* plugin = p->Attribute("plugin");
      if (!plugin) {
        *err = Where(f, p) + ": <plugin> without a 'plugin' attribute" + allowed;
        return false;
      }
      if (strcasecmp(plugin, kPluginName) != 0) {
        *err = Where(f, p) + ": <plugin plugin=\"" + plugin + "\">: MuJoCo " + MujocoVersion() +
               " has no plugin support and contactkit understands only " + kPluginName + allowed;
        return false;
      }
      for (XMLElement* c = p->FirstChildElement(); c; c = c->NextSiblingElement()) {
        if (std::strcmp(c->Name(), "config") == 0) {
          const char* key = c->Attribute("key");
          *err = Where(f, c) + ": <config" +
                 (key ? " key=\"" + std::string(key) + "\"" : std::string()) +
                 "> is outside an <instance>; allowed: <config> inside <instance name=\"...\">";
          return false;
        }
        if (std::strcmp(c->Name(), "instance") != 0) {
          *err = Where(f, c) + ": <" + c->Name() +
                 "> inside <plugin>; allowed: <instance name=\"...\">";
          return false;
        }
        if (!VisitInstance(f, c, err)) return false;
      }
    }
    return true;
  }

  // <instance name="..."> with <config key="..." value="..."/> children
  bool VisitInstance(XmlFile* f, XMLElement* e, std::string* err) {
    const char* name = e->Attribute("name");
    if (!name || !name[0]) {
      *err = Where(f, e) + ": <instance> without a name; allowed: <instance name=\"...\">";
      return false;
    }
    if (tag_file_) {
      *err = Where(f, e) + ": a second " + kPluginName + " <instance name=\"" + name +
             "\"> (the first, '" + instance_ + "', is at " + instance_where_ +
             "); allowed: one instance per model";
      return false;
    }
    tag_file_ = f;
    tag_cut_ = f->cuts.size() - 1;
    instance_ = name;
    instance_where_ = Where(f, e);
    ckSettings settings;
    ck_defaultSettings(&settings);
    for (XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      const std::string where = Where(f, c);
      if (std::strcmp(c->Name(), "config") != 0) {
        *err = where + ": <" + c->Name() +
               "> inside <instance>; allowed: <config key=\"...\" value=\"...\">";
        return false;
      }
      const char* key = c->Attribute("key");
      const char* value = c->Attribute("value");
      if (!key) {
        *err = where + ": <config> without a 'key' attribute; allowed: <config key=\"<setting>\" " +
               "value=\"...\"> with a setting of: " + KnownKeys();
        return false;
      }
      const std::string what = "<config key=\"" + std::string(key) + "\">";
      if (!value) {
        *err = where + ": " + what + " without a 'value' attribute; allowed: <config key=\"" + key +
               "\" value=\"...\">";
        return false;
      }
      for (const Setting& s : config_) {
        if (s.key == key) {
          *err = where + ": " + what + ": setting '" + key + "' is given twice (also at " +
                 s.where + "); allowed: once per model";
          return false;
        }
      }
      char msg[1024];
      if (ck_setSetting(&settings, key, value, msg, sizeof(msg)) != 0) {
        *err = where + ": <config key=\"" + key + "\" value=\"" + value + "\">: " + msg;
        return false;
      }
      config_.push_back({key, value, where, what});
    }
    return true;
  }

  // remember <custom> fields "contactkit:<key>" to find keys given twice
  void RecordCustom(const XmlFile* f, const XMLElement* e) {
    const size_t plen = std::strlen(kCustomPrefix);
    for (const XMLElement* c = e->FirstChildElement(); c; c = c->NextSiblingElement()) {
      const char* name = c->Attribute("name");
      if (!name || std::strncmp(name, kCustomPrefix, plen) != 0) continue;
      custom_.push_back({name + plen, "", Where(f, c),
                         "<custom><" + std::string(c->Name()) + " name=\"" + name + "\">"});
    }
  }

  // a key given by the tag and a <custom> field, or by two <custom> fields
  bool CheckRepeats(std::string* err) const {
    for (size_t i = 0; i < custom_.size(); i++) {
      const Setting& s = custom_[i];
      for (const Setting& t : config_) {
        if (t.key == s.key) {
          *err = s.where + ": " + s.what + ": setting '" + s.key +
                 "' is also given by the plugin tag at " + t.where +
                 "; allowed: once per model (in the plugin tag or in one <custom> field)";
          return false;
        }
      }
      for (size_t j = 0; j < i; j++) {
        if (custom_[j].key == s.key) {
          *err = s.where + ": " + s.what + ": setting '" + s.key + "' is also given by " +
                 custom_[j].what + " at " + custom_[j].where +
                 "; allowed: once per model (in the plugin tag or in one <custom> field)";
          return false;
        }
      }
    }
    return true;
  }

  // the <custom> fields that replace the tag
  std::string Injection() const {
    std::string out = "<custom>";
    std::string keys;
    for (const Setting& s : config_) {
      out += "<text name=\"" + std::string(kCustomPrefix) + s.key + "\" data=\"" + Escape(s.value) +
             "\"/>";
      keys += (keys.empty() ? "" : " ") + s.key;
    }
    out += "<text name=\"" + std::string(kTagField) + "\" data=\"" + Escape(instance_) + "|" +
           keys + "\"/></custom>";
    return out;
  }

  // f's text with its <extension> elements replaced by the <custom> fields and newlines
  bool Rewrite(const XmlFile& f, std::string* out, std::string* err) const {
    const std::string& text = f.source.text;
    std::vector<Span> spans;
    if (!ElementSpans(text, "extension", &spans) || spans.size() != f.cuts.size()) {
      *err = f.source.path + ": cannot locate the <extension> elements in the text";
      return false;
    }
    *out = text;
    for (size_t i = spans.size(); i-- > 0;) {
      const size_t begin = spans[i].first, end = spans[i].second;
      if (LineOf(text, begin) != f.cuts[i]->GetLineNum()) {
        *err = Where(&f, f.cuts[i]) + ": cannot locate this <extension> in the text";
        return false;
      }
      std::string replacement = &f == tag_file_ && i == tag_cut_ ? Injection() : "";
      replacement.append(std::count(text.begin() + begin, text.begin() + end, '\n'), '\n');
      out->replace(begin, end - begin, replacement);
    }
    return true;
  }

  // the VFS finds files by base name: no other file of the model may share f's
  bool CheckVfsName(const XmlFile& f, std::string* err) const {
    const std::string name = VfsName(f.source.path);
    if (name.empty() || name.size() >= mjMAXVFSNAME) {
      *err = f.source.path + ": file name is empty or too long for MuJoCo's VFS";
      return false;
    }
    for (const auto& g : files_) {
      if (g.get() != &f && VfsName(g->source.path) == name) {
        *err =
            f.source.path + ": contactkit gives MuJoCo " + MujocoVersion() +
            " a rewritten copy of this file through a VFS, which finds files by base name, and " +
            g->source.path + " has the same base name; allowed: distinct file names";
        return false;
      }
    }
    return true;
  }

  // add a file to a MuJoCo 2.x VFS
  static bool AddVfs(mjVFS* vfs, const std::string& name, const void* data, int size,
                     std::string* err) {
    if (size <= 0) {
      *err = "VFS file '" + name + "' is empty";
      return false;
    }
    const int r = mj_makeEmptyFileVFS(vfs, name.c_str(), size);
    if (r != 0) {
      *err = "cannot add '" + name + "' to the VFS: " +
             (r == 1 ? "it is full (" + std::to_string(mjMAXVFS - 1) + " files)" : "repeated name");
      return false;
    }
    std::memcpy(vfs->filedata[mj_findFileVFS(vfs, name.c_str())], data, size);
    return true;
  }

  std::string filename_;               // model file as given
  std::string dir_;                    // its directory, prefix of <include> paths
  const mjVFS* vfs_;                   // the user's VFS, may be null
  std::vector<XmlFilePtr> files_;      // main file and included files
  const XmlFile* tag_file_ = nullptr;  // file holding the instance
  size_t tag_cut_ = 0;                 // its <extension> among the file's cuts
  std::string instance_;               // instance name
  std::string instance_where_;         // "path:line" of the instance
  std::vector<Setting> config_;        // its configs
  std::vector<Setting> custom_;        // <custom> fields "contactkit:<key>"
};

mjModel* LoadXML(const char* filename, const mjVFS* vfs, char* error, int error_sz) {
  std::vector<SourceText> files(1);
  files[0].path = filename;
  if (!ReadModelFile(filename, vfs, &files[0].text)) {
    SetError(error, error_sz,
             std::string("cannot read model file '") + filename + "'" +
                 (vfs ? " (not in the VFS, not on disk)" : ""));
    return nullptr;
  }

  // files without a tag, include or plugin element go to MuJoCo as they are
  const std::string& text = files[0].text;
  if (text.find("<extension") == std::string::npos && text.find("<include") == std::string::npos &&
      text.find("<plugin") == std::string::npos) {
    mjModel* m = mj_loadXML(filename, vfs, error, error_sz);
    if (!m && error && std::strstr(error, "XML parse error")) {
      SetError(error, error_sz, MalformedMessage(filename, text, error));
    }
    return m ? CheckSettings(m, filename, files, error, error_sz) : nullptr;
  }

  TagRewriter rewriter(filename, vfs);
  std::string err;
  if (!rewriter.Check(text, &err)) {
    SetError(error, error_sz, err);
    return nullptr;
  }
  mjModel* m = rewriter.HasTag() ? rewriter.Load(error, error_sz)
                                 : mj_loadXML(filename, vfs, error, error_sz);
  return m ? CheckSettings(m, filename, rewriter.Sources(), error, error_sz) : nullptr;
}

#endif  // CK_MJ3

}  // namespace
}  // namespace contactkit

extern "C" mjModel* ck_loadXML(const char* filename, const mjVFS* vfs, char* error, int error_sz) {
  if (error && error_sz > 0) error[0] = 0;
  if (!filename || !filename[0]) {
    contactkit::SetError(error, error_sz, "ck_loadXML: filename is NULL or empty");
    return nullptr;
  }
  try {
    return contactkit::LoadXML(filename, vfs, error, error_sz);
  } catch (const std::bad_alloc&) {
    contactkit::SetError(error, error_sz, "ck_loadXML: out of memory");
    return nullptr;
  }
}

extern "C" mjModel* ck_loadXMLString(const char* xml, char* error, int error_sz) {
  if (error && error_sz > 0) error[0] = 0;
  if (!xml) {
    if (error && error_sz > 0) std::snprintf(error, error_sz, "ck_loadXMLString: xml is NULL");
    return nullptr;
  }
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/contactkit_XXXXXX.xml";
  std::vector<char> name(path.begin(), path.end());
  name.push_back(0);
  const int fd = mkstemps(name.data(), 4);
  if (fd < 0) {
    if (error && error_sz > 0) {
      std::snprintf(error, error_sz, "ck_loadXMLString: cannot create a temporary file in %s",
                    dir && *dir ? dir : "/tmp");
    }
    return nullptr;
  }
  const size_t size = std::strlen(xml);
  const bool written = write(fd, xml, size) == static_cast<ssize_t>(size);
  close(fd);
  mjModel* m = nullptr;
  if (written) {
    m = ck_loadXML(name.data(), nullptr, error, error_sz);
    // the message names the string, not the temporary file (deleted below): "<xml string>:6: ..."
    if (!m && error && error_sz > 0) {
      std::string msg = error;
      const std::string full = name.data();
      const std::string base = full.substr(full.rfind('/') + 1);
      if (msg.find(base) == std::string::npos) msg = "<xml string>: " + msg;
      for (const std::string& from : {full, base}) {
        for (size_t at = msg.find(from); at != std::string::npos; at = msg.find(from, at)) {
          msg.replace(at, from.size(), "<xml string>");
          at += 12;
        }
      }
      std::snprintf(error, error_sz, "%s", msg.c_str());
    }
  } else if (error && error_sz > 0) {
    std::snprintf(error, error_sz, "ck_loadXMLString: cannot write the temporary file %s",
                  name.data());
  }
  std::remove(name.data());
  return m;
}
