// Copyright 2026 The contactkit developers.
//
// ck-bench comfree-slopes: ComFree Fig. 7 in detail. Each stacked-primitive scene is settled once
// with MuJoCo's CG, then every solver variant steps from that same state; the benchmark reports
// median step and stage times, log-log slopes against contacts, ratios to comfree and the targets.
#ifndef CONTACTKIT_TOOLS_BENCH_SUITE_COMFREE_SLOPES_H_
#define CONTACTKIT_TOOLS_BENCH_SUITE_COMFREE_SLOPES_H_

#include <string>
#include <vector>

namespace contactkit::bench {

struct SlopesOptions {
  std::string out;           // output folder
  std::vector<int> solvers;  // default variants: those of these solvers
  std::string sizes;     // NXxNYxLAYERS,... (empty: 3x2x1 .. 7x7x14, about 10 to 2000+ contacts)
  std::string variants;  // comma separated (empty: comfree, newton, pgs, ipm)
  int settle = -1;       // CG steps before timing (-1: 1000)
  int steps = -1;        // timed steps per variant and scene (-1: 20)
  double budget = -1;    // seconds per variant and scene after which timing stops (-1: 15)
  bool quick = false, plots = true, progress = true;
};

// the variants' names, for the usage text
extern const char kSlopesVariants[];

// writes OUT/comfree_slopes.csv, comfree_slopes.png (step) and comfree_slopes_stage.png
// (constraint stage); appends the Markdown to report; returns 0, or 2 on bad options or a scene
// that fails to load
int ComfreeSlopes(const SlopesOptions& o, std::string* report);

}  // namespace contactkit::bench

#endif  // CONTACTKIT_TOOLS_BENCH_SUITE_COMFREE_SLOPES_H_
