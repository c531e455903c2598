// Copyright 2026 The contactkit developers.
//
// ck-bench robots: the robot suite (tools/common/robot_suite.h) at full length, every case of
// every model present with every solver, timed against mj_step in the same process.
#ifndef CONTACTKIT_TOOLS_BENCH_SUITE_ROBOTS_H_
#define CONTACTKIT_TOOLS_BENCH_SUITE_ROBOTS_H_

#include <string>
#include <vector>

namespace contactkit::bench {

struct RobotsOptions {
  std::string out;         // output folder
  std::string models_dir;  // Menagerie robots
  std::vector<int> solvers;
  bool quick = false, plots = true, progress = true;
};

// writes OUT/robots.csv, robots.md, robots_time.png and robots_penetration.png; appends the
// Markdown to report; returns 0, or 2 if a model fails to load
int RobotsBench(const RobotsOptions& o, std::string* report);

}  // namespace contactkit::bench

#endif  // CONTACTKIT_TOOLS_BENCH_SUITE_ROBOTS_H_
