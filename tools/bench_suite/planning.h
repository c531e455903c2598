// Copyright 2026 The contactkit developers.
//
// ck-bench dojo-planning: Dojo's Table III on bundled models and the Menagerie Unitree A1, iLQR
// (tools/common/ilqr.h) with each solver's Jacobians and with MuJoCo's finite differences.
#ifndef CONTACTKIT_TOOLS_BENCH_SUITE_PLANNING_H_
#define CONTACTKIT_TOOLS_BENCH_SUITE_PLANNING_H_

#include <string>
#include <vector>

namespace contactkit::bench {

struct PlanningOptions {
  std::string out;        // output folder
  std::string menagerie;  // folder of Menagerie robots (empty: the quadruped task is skipped)
  std::vector<int> solvers;
  bool quick = false, plots = true, progress = true;
};

// writes OUT/dojo_planning.csv, dojo_planning_<task>.png; appends the Markdown table to report;
// returns 0, or 2 if a model fails to load
int PlanningBench(const PlanningOptions& o, std::string* report);

}  // namespace contactkit::bench

#endif  // CONTACTKIT_TOOLS_BENCH_SUITE_PLANNING_H_
