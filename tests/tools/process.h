// Copyright 2026 The contactkit developers.
//
// Test helpers for the tools' tests: run a command line with extra environment variables and
// capture its exit code, stdout and stderr; temporary folders; reading a file.
#ifndef CONTACTKIT_TESTS_TOOLS_PROCESS_H_
#define CONTACTKIT_TESTS_TOOLS_PROCESS_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace contactkit::test {

struct ProcessResult {
  int status = -1;  // exit code, or -1 if the command did not exit normally
  std::string out;  // stdout
  std::string err;  // stderr
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// a fresh folder under the test's temporary directory
inline std::string MakeTempDir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ck_" + tag + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back(0);
  const char* dir = mkdtemp(buf.data());
  return dir ? std::string(dir) : std::string();
}

// quote an argument for /bin/sh
inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// run argv with env (NAME, value) pairs added, through /bin/sh; stdout and stderr captured
inline ProcessResult RunProcess(const std::vector<std::string>& argv,
                                const std::vector<std::pair<std::string, std::string>>& env = {},
                                const std::string& tag = "proc") {
  const std::string dir = MakeTempDir(tag);
  std::string cmd = "env";
  for (const auto& kv : env) cmd += " " + ShellQuote(kv.first + "=" + kv.second);
  for (const std::string& a : argv) cmd += " " + ShellQuote(a);
  cmd += " >" + ShellQuote(dir + "/out") + " 2>" + ShellQuote(dir + "/err");
  ProcessResult r;
  const int rc = std::system(cmd.c_str());
  r.status = (rc != -1 && WIFEXITED(rc)) ? WEXITSTATUS(rc) : -1;
  r.out = ReadFile(dir + "/out");
  r.err = ReadFile(dir + "/err");
  std::remove((dir + "/out").c_str());
  std::remove((dir + "/err").c_str());
  rmdir(dir.c_str());
  return r;
}

// true if an executable is on PATH (or is an executable path)
inline bool HaveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  const std::string cmd = "command -v " + ShellQuote(name) + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_TOOLS_PROCESS_H_
