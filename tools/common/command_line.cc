// Copyright 2026 The contactkit developers.
#include "tools/common/command_line.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace contactkit::tools {

CommandLine::CommandLine(std::string tool, std::string usage)
    : tool_(std::move(tool)), usage_(std::move(usage)), app_(std::make_unique<CLI::App>()) {
  // our own --help (the usage text) and our own message for unknown options
  app_->set_help_flag();
  app_->allow_extras();
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app_->add_flag("-h,--help", help_);
}

CommandLine::~CommandLine() = default;

void CommandLine::Positional(const std::string& noun, std::string* value) {
  noun_ = noun;
  positional_ = value;
  app_->add_option(noun, *value);
}

void CommandLine::Flag(const std::string& name, bool* value, bool set_to) {
  app_->add_flag_callback(name, [value, set_to] { *value = set_to; });
}

void CommandLine::Text(const std::string& names, std::string* value) {
  app_->add_option(names, *value);
}

void CommandLine::Texts(const std::string& name, std::vector<std::string>* values) {
  app_->add_option(name, *values)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
}

void CommandLine::Custom(const std::string& name,
                         std::function<bool(const std::string&, std::string*)> parse) {
  app_->add_option_function<std::string>(name, [name, parse](const std::string& v) {
    std::string error;
    if (!parse(v, &error)) throw CLI::ValidationError(name + ": " + error);
  });
}

void CommandLine::Int(const std::string& name, int* value, int lo, int hi,
                      const std::string& what) {
  Custom(name, [=](const std::string& v, std::string*) {
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end || errno || n < lo || n > hi) {
      throw CLI::ValidationError(name + " takes " + what + ", got '" + v + "'");
    }
    *value = static_cast<int>(n);
    return true;
  });
}

void CommandLine::Number(const std::string& name, double* value, double lo, bool lo_allowed,
                         const std::string& what) {
  Custom(name, [=](const std::string& v, std::string*) {
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !std::isfinite(x) || x < lo || (x == lo && !lo_allowed)) {
      throw CLI::ValidationError(name + " takes " + what + ", got '" + v + "'");
    }
    *value = x;
    return true;
  });
}

void CommandLine::Choice(const std::string& name, const std::string& noun, int* value,
                         const std::vector<std::pair<std::string, int>>& words) {
  Custom(name, [=](const std::string& v, std::string* error) {
    std::string allowed;
    for (const auto& [word, id] : words) {
      if (v == word) {
        *value = id;
        return true;
      }
      allowed += (allowed.empty() ? "" : ", ") + word;
    }
    *error = "unknown " + noun + " '" + v + "'; allowed: " + allowed;
    return false;
  });
}

int CommandLine::Fail(const std::string& message) const {
  std::fprintf(stderr, "%s: %s\n", tool_.c_str(), message.c_str());
  return 2;
}

int CommandLine::Parse(int argc, const char* const* argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ArgumentMismatch& e) {
    // CLI11 says "--steps: 1 required TEXT missing"
    const std::string what = e.what();
    return Fail(what.substr(0, what.find(':')) + " needs a value");
  } catch (const CLI::ParseError& e) {
    return Fail(e.what());
  }
  if (help_) {
    std::printf("%s", usage_.c_str());
    return 0;
  }
  const std::vector<std::string> extras = app_->remaining();
  for (const std::string& a : extras) {
    if (a.size() > 1 && a[0] == '-') return Fail("unknown option '" + a + "'\n\n" + usage_);
  }
  if (!extras.empty()) {
    if (!positional_) return Fail("unexpected argument '" + extras[0] + "'\n\n" + usage_);
    return Fail("more than one " + noun_ + " given ('" + *positional_ + "', '" + extras[0] + "')");
  }
  return -1;
}

}  // namespace contactkit::tools
