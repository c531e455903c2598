// Copyright 2026 The contactkit developers.
#include "tools/bench_suite/plot.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace contactkit::bench {

bool HaveGnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

bool Plot(const std::string& png, const PlotSpec& spec, std::string* error) {
  const std::string base = png.size() > 4 ? png.substr(0, png.size() - 4) : png;
  const std::string dat = base + ".dat", gp = base + ".gp";
  int nblock = 0;
  {
    std::ofstream f(dat);
    // bars: one row per x tic, one column per series ("-" where a bar is missing)
    for (size_t k = 0; spec.bars && k < spec.xtics.size(); k++) {
      f << "\"" << spec.xtics[k] << "\"";
      for (const Series& s : spec.series) {
        const bool ok = k < s.y.size() && std::isfinite(s.y[k]) && !(spec.logy && s.y[k] <= 0);
        f << " " << (ok ? std::to_string(s.y[k]) : "-");
      }
      f << "\n";
    }
    for (const Series& s : spec.series) {
      if (spec.bars) break;
      f << "# " << s.name << "\n";
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); i++) {
        // log axes cannot show zeros or negatives
        if (!std::isfinite(s.y[i]) || (spec.logy && s.y[i] <= 0) || (spec.logx && s.x[i] <= 0)) {
          continue;
        }
        f << s.x[i] << " " << s.y[i] << "\n";
      }
      f << "\n\n";
      nblock++;
    }
    if (!f) {
      *error = "cannot write " + dat;
      return false;
    }
  }
  // many lines (the planning tasks' 18 sources): wider, and each line its own point and dash
  const std::string size = nblock > 8 ? "1300,700" : "900,600";
  std::ofstream g(gp);
  g << "set terminal pngcairo size " << size << " noenhanced\n";
  g << "set output '" << png << "'\n";
  g << "set title '" << spec.title << "'\n";
  g << "set xlabel '" << spec.xlabel << "'\nset ylabel '" << spec.ylabel << "'\n";
  g << "set grid\nset key outside right top\n";
  if (spec.logx) g << "set logscale x\n";
  if (spec.bars) {
    g << "set style data histogram\nset style histogram cluster gap 1\n"
      << "set style fill solid 0.8 border -1\nset boxwidth 0.9\nset datafile missing '-'\n"
      << "set xtics rotate by -30\n";
  } else if (!spec.xtics.empty()) {
    g << "set xrange [-0.5:" << spec.xtics.size() - 0.5 << "]\nset xtics rotate by -30 (";
    for (size_t i = 0; i < spec.xtics.size(); i++) {
      g << (i ? ", " : "") << "'" << spec.xtics[i] << "' " << i;
    }
    g << ")\n";
  }
  if (spec.logy) g << "set logscale y\n";
  g << "plot ";
  for (size_t i = 0; spec.bars && i < spec.series.size(); i++) {
    g << (i ? ", " : "") << "'" << dat << "' using " << i + 2 << (i ? "" : ":xtic(1)") << " title '"
      << spec.series[i].name << "'";
  }
  for (int i = 0; i < nblock; i++) {
    g << (i ? ", " : "") << "'" << dat << "' index " << i << " using 1:2 with linespoints lw 2 pt "
      << 7 + (i / 8) % 6 << " dt " << 1 + i / 8 << " title '" << spec.series[i].name << "'";
  }
  g << "\n";
  g.close();
  // pngcairo may be missing from gnuplot-nox: fall back to the plain png terminal
  std::string cmd = "gnuplot '" + gp + "' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream in(gp);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string from = "pngcairo";
    text.replace(text.find(from), from.size(), "png");
    std::ofstream(gp) << text;
    if (std::system(cmd.c_str()) != 0) {
      *error = "gnuplot failed on " + gp;
      return false;
    }
  }
  return true;
}

}  // namespace contactkit::bench
