// Copyright 2026 The contactkit developers.
#include "support/grid_scene.h"

#include <sstream>

namespace contactkit::test {

std::string GridPinnedXML(int n, double spacing) {
  std::ostringstream x;
  x << "<mujoco model=\"grid pinned at two corners\">\n"
       "  <option timestep=\"0.005\" jacobian=\"sparse\"/>\n"
       "  <size nconmax=\"200\" njmax=\"1000\"/>\n"
       "  <worldbody>\n"
       "    <geom name=\"ground\" type=\"plane\" size=\"0 0 1\" condim=\"1\"/>\n"
       "    <body mocap=\"true\" pos=\"-.1 .05 0\" zaxis=\".5 0 1\">\n"
       "      <geom type=\"capsule\" size=\".1 .1\" condim=\"1\"/>\n"
       "    </body>\n";
  const double half = 0.5 * spacing * (n - 1);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      x << "    <body name=\"B" << i << "_" << j << "\" pos=\"" << i * spacing - half << " "
        << j * spacing - half << " 1\">\n";
      // pinned bodies have no joints
      if (!(j == 0 && (i == 0 || i == n - 1))) {
        x << "      <joint type=\"slide\" axis=\"1 0 0\"/><joint type=\"slide\" axis=\"0 1 0\"/>"
             "<joint type=\"slide\" axis=\"0 0 1\"/>\n";
      }
      x << "      <geom size=\".02\"/><site name=\"S" << i << "_" << j << "\"/>\n    </body>\n";
    }
  }
  x << "  </worldbody>\n  <tendon>\n";
  std::ostringstream eq;
  int t = 0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      // a tendon to the right and one up, each held at its length
      for (int d = 0; d < 2; d++) {
        const int i2 = i + (d == 0), j2 = j + (d == 1);
        if (i2 >= n || j2 >= n) continue;
        x << "    <spatial name=\"T" << t << "\" width=\".003\"><site site=\"S" << i << "_" << j
          << "\"/><site site=\"S" << i2 << "_" << j2 << "\"/></spatial>\n";
        eq << "    <tendon tendon1=\"T" << t << "\" solref=\".01 1\" solimp=\".99 .99 .001\"/>\n";
        t++;
      }
    }
  }
  x << "  </tendon>\n  <equality>\n" << eq.str() << "  </equality>\n</mujoco>\n";
  return x.str();
}

}  // namespace contactkit::test
