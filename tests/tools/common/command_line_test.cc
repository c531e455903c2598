// Copyright 2026 The contactkit developers.
//
// The tools' command-line parser: values land in their variables, --help prints the usage, and
// each kind of bad input exits with 2 and a message that names the option and what it takes.
#include "tools/common/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace contactkit::tools {
namespace {

// the options of a small tool
struct Tool {
  std::string model, out;
  std::vector<std::string> sets;
  int steps = 10, integrator = -1;
  double timestep = 0;
  bool quiet = false, plots = true;
};

class CommandLineTest : public ::testing::Test {
 protected:
  // parse args into tool_; the exit code (-1: go on) with stdout and stderr captured
  int Parse(std::vector<std::string> args) {
    CommandLine cl("tool", "usage: tool MODEL [options]\n");
    cl.Positional("model", &tool_.model);
    cl.Text("--out,--dir", &tool_.out);
    cl.Texts("--set", &tool_.sets);
    cl.Int("--steps", &tool_.steps, 1, 1000, "a positive integer up to 1000");
    cl.Number("--timestep", &tool_.timestep, 0, false, "a positive number of seconds");
    cl.Choice("--integrator", "integrator", &tool_.integrator, {{"euler", 0}, {"rk4", 1}});
    cl.Flag("--quiet", &tool_.quiet);
    cl.Flag("--no-plots", &tool_.plots, false);
    std::vector<const char*> argv = {"tool"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    const int rc = cl.Parse(static_cast<int>(argv.size()), argv.data());
    out_ = testing::internal::GetCapturedStdout();
    err_ = testing::internal::GetCapturedStderr();
    return rc;
  }
  Tool tool_;
  std::string out_, err_;
};

TEST_F(CommandLineTest, ValuesLandInTheirVariables) {
  ASSERT_EQ(Parse({"--steps", "5", "box", "--timestep=0.01", "--set", "a=1", "--set", "b=2",
                   "--integrator", "rk4", "--dir", "x", "--quiet", "--no-plots"}),
            -1)
      << err_;
  EXPECT_EQ(tool_.model, "box");
  EXPECT_EQ(tool_.steps, 5);
  EXPECT_DOUBLE_EQ(tool_.timestep, 0.01);
  EXPECT_EQ(tool_.sets, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(tool_.integrator, 1);
  EXPECT_EQ(tool_.out, "x");
  EXPECT_TRUE(tool_.quiet);
  EXPECT_FALSE(tool_.plots);
  EXPECT_EQ(err_, "");
}

TEST_F(CommandLineTest, DefaultsStayWhenNotGiven) {
  ASSERT_EQ(Parse({"box"}), -1) << err_;
  EXPECT_EQ(tool_.steps, 10);
  EXPECT_EQ(tool_.integrator, -1);
  EXPECT_FALSE(tool_.quiet);
  EXPECT_TRUE(tool_.plots);
}

TEST_F(CommandLineTest, LastValueWins) {
  ASSERT_EQ(Parse({"box", "--steps", "3", "--steps", "4"}), -1) << err_;
  EXPECT_EQ(tool_.steps, 4);
}

TEST_F(CommandLineTest, HelpPrintsTheUsage) {
  for (const char* h : {"--help", "-h"}) {
    EXPECT_EQ(Parse({"box", h}), 0);
    EXPECT_EQ(out_, "usage: tool MODEL [options]\n");
    EXPECT_EQ(err_, "");
  }
}

TEST_F(CommandLineTest, BadNumbersNameTheOptionAndWhatItTakes) {
  EXPECT_EQ(Parse({"box", "--steps", "abc"}), 2);
  EXPECT_EQ(err_, "tool: --steps takes a positive integer up to 1000, got 'abc'\n");
  EXPECT_EQ(Parse({"box", "--steps", "0"}), 2);
  EXPECT_NE(err_.find("got '0'"), std::string::npos) << err_;
  EXPECT_EQ(Parse({"box", "--steps", "1001"}), 2);
  EXPECT_EQ(Parse({"box", "--steps", "2.5"}), 2);
  EXPECT_EQ(Parse({"box", "--timestep", "-1"}), 2);
  EXPECT_EQ(err_, "tool: --timestep takes a positive number of seconds, got '-1'\n");
  EXPECT_EQ(Parse({"box", "--timestep", "0"}), 2);
  EXPECT_EQ(Parse({"box", "--timestep", "nan"}), 2);
  EXPECT_EQ(Parse({"box", "--timestep", "1e-3s"}), 2);
}

TEST_F(CommandLineTest, UnknownWordsListWhatIsAllowed) {
  EXPECT_EQ(Parse({"box", "--integrator", "rk5"}), 2);
  EXPECT_EQ(err_, "tool: --integrator: unknown integrator 'rk5'; allowed: euler, rk4\n");
}

TEST_F(CommandLineTest, MissingValueIsNamed) {
  EXPECT_EQ(Parse({"box", "--steps"}), 2);
  EXPECT_EQ(err_, "tool: --steps needs a value\n");
}

TEST_F(CommandLineTest, UnknownOptionIsNamedWithTheUsage) {
  EXPECT_EQ(Parse({"box", "--fast"}), 2);
  EXPECT_EQ(err_, "tool: unknown option '--fast'\n\nusage: tool MODEL [options]\n\n");
}

TEST_F(CommandLineTest, SecondPositionalIsRefused) {
  EXPECT_EQ(Parse({"box", "ball"}), 2);
  EXPECT_EQ(err_, "tool: more than one model given ('box', 'ball')\n");
}

}  // namespace
}  // namespace contactkit::tools
