// Copyright 2026 The contactkit developers.
//
// PNG line and bar plots through gnuplot (Debian's gnuplot-nox, png terminal), skipped with a
// message when gnuplot is absent.
#ifndef CONTACTKIT_TOOLS_BENCH_SUITE_PLOT_H_
#define CONTACTKIT_TOOLS_BENCH_SUITE_PLOT_H_

#include <string>
#include <vector>

namespace contactkit::bench {

struct Series {
  std::string name;
  std::vector<double> x, y;
};

struct PlotSpec {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<Series> series;
  std::vector<std::string> xtics;  // names of x = 0, 1, 2, ... (empty: numeric axis)
  bool bars = false;               // clustered bars: series[i].y[k] over xtics[k] (NaN: no bar)
};

// true if gnuplot is on PATH
bool HaveGnuplot();

// write png (and png without extension + ".dat"/".gp" beside it); false with a message
bool Plot(const std::string& png, const PlotSpec& spec, std::string* error);

}  // namespace contactkit::bench

#endif  // CONTACTKIT_TOOLS_BENCH_SUITE_PLOT_H_
