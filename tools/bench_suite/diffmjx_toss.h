// Copyright 2026 The contactkit developers.
//
// ck-bench diffmjx-toss: DiffMJX's Fig. 5 and Fig. 17. A cube tossed at v_x = -2 m/s onto a floor
// with stiff soft contact (solref 0.005 1, solimp 0 0.95 0.001 0.5 2); the loss is its final x
// position after the horizon, differentiated with respect to its initial velocity by
// ck_rolloutGrad. Each integrator (MuJoCo's semi-implicit Euler and RK4 at several fixed steps,
// tsit5 and dopri5 at several tolerances) is compared with a reference (tsit5 at tolerance 1e-12,
// its gradient by central differences): loss and gradient error against forward and gradient
// time.
#ifndef CONTACTKIT_TOOLS_BENCH_SUITE_DIFFMJX_TOSS_H_
#define CONTACTKIT_TOOLS_BENCH_SUITE_DIFFMJX_TOSS_H_

#include <string>

namespace contactkit::bench {

struct TossOptions {
  std::string out;  // output folder
  bool quick = false, plots = true, progress = true;
};

// writes OUT/diffmjx_toss.csv and diffmjx_toss.png (gradient error against gradient time);
// appends the Markdown table to report; returns 0, or 2 if the reference cannot be computed
int TossBench(const TossOptions& o, std::string* report);

}  // namespace contactkit::bench

#endif  // CONTACTKIT_TOOLS_BENCH_SUITE_DIFFMJX_TOSS_H_
