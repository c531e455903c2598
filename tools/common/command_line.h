// Copyright 2026 The contactkit developers.
//
// The tools' one command-line parser (CLI11 underneath): options are declared with the variable
// they fill and what they accept; the tool's usage text is its --help.
#ifndef CONTACTKIT_TOOLS_COMMON_COMMAND_LINE_H_
#define CONTACTKIT_TOOLS_COMMON_COMMAND_LINE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace contactkit::tools {

// Command line of one tool. Declare the options, then Parse(). Bad input is reported on stderr
// as "<tool>: <message>" and Parse() returns 2:
//   unknown option '--x'                    (followed by the usage text)
//   --steps needs a value
//   --steps takes a positive integer, got 'abc'
//   --format: unknown format 'gif'; allowed: auto, png, video
//   more than one model given ('a', 'b')
// Options take "--name VALUE" or "--name=VALUE" and may come before or after the positional.
class CommandLine {
 public:
  // tool: the program's name in messages; usage: the text --help prints
  CommandLine(std::string tool, std::string usage);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // the positional argument (one at most); noun names it in "more than one <noun> given"
  void Positional(const std::string& noun, std::string* value);

  // a flag: sets *value to set_to when given
  void Flag(const std::string& name, bool* value, bool set_to = true);

  // a string option; names may list aliases ("--menagerie,--models-dir")
  void Text(const std::string& names, std::string* value);

  // a repeatable string option: each occurrence appends
  void Texts(const std::string& name, std::vector<std::string>* values);

  // an integer in [lo, hi]; what says what it takes ("a positive integer")
  void Int(const std::string& name, int* value, int lo, int hi, const std::string& what);

  // a finite number above lo (at lo too if lo_allowed); what says what it takes
  void Number(const std::string& name, double* value, double lo, bool lo_allowed,
              const std::string& what);

  // one of the given words, each with the value it stands for; noun names the kind of word
  void Choice(const std::string& name, const std::string& noun, int* value,
              const std::vector<std::pair<std::string, int>>& words);

  // any value checked by parse: it returns false with a message to reject the value (the
  // message is printed after "<name>: ")
  void Custom(const std::string& name,
              std::function<bool(const std::string& value, std::string* error)> parse);

  // Parse argv. Returns -1 to go on, 0 after printing the usage for --help or -h (on stdout),
  // 2 after bad input (message on stderr).
  int Parse(int argc, const char* const* argv);

  // print "<tool>: <message>" on stderr and return 2 (the exit code for bad input)
  int Fail(const std::string& message) const;

  const std::string& usage() const { return usage_; }

 private:
  std::string tool_, usage_;
  std::string noun_;  // the positional's noun ("" if none)
  std::string* positional_ = nullptr;
  bool help_ = false;
  std::unique_ptr<CLI::App> app_;
};

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_COMMAND_LINE_H_
