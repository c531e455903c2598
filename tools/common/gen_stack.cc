// Copyright 2026 The contactkit developers.
#include "tools/common/gen_stack.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace contactkit::tools {
namespace {

// deterministic uniform number in [-1, 1] from a few integers (splitmix64 finaliser)
double Jitter(int a, int b, int c, int salt) {
  std::uint64_t z = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(a + 1) ^
                    0xBF58476D1CE4E5B9ull * static_cast<std::uint64_t>(b + 7) ^
                    0x94D049BB133111EBull * static_cast<std::uint64_t>(c + 13) ^
                    0xD6E8FEB86659FD93ull * static_cast<std::uint64_t>(salt + 101);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<double>(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;  // 53 bits -> [-1, 1)
}

// printf into a std::string (C locale number formatting is assumed)
template <typename... Args>
void Append(std::string& out, const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  if (n <= 0) return;
  const std::size_t old = out.size();
  out.resize(old + static_cast<std::size_t>(n) + 1);
  std::snprintf(&out[old], static_cast<std::size_t>(n) + 1, fmt, args...);
  out.resize(old + static_cast<std::size_t>(n));
}

// layout: with these tilts a body's half-extent is at most 0.081 m horizontally (box; 0.075 for
// the others) and 0.072 m vertically, and two boxes are never horizontal neighbours in a layer,
// so no two bodies touch at t = 0 (checked up to 20 x 20 x 10)
constexpr double kPitch = 0.18;   // horizontal distance between columns
constexpr double kJitter = 0.01;  // +- horizontal jitter of each body
constexpr double kTilt = 15.0;    // +- degrees of tilt about x and y
constexpr double kZPitch = 0.17;  // vertical distance between layers
constexpr double kZ0 = 0.10;      // centre height of the bottom layer (>= 1.4 cm clearance)

// visual settings, materials and geom classes, up to the opening of <worldbody>
const char kStatic[] =
    "\n"
    "  <visual>\n"
    "    <headlight ambient=\"0.35 0.35 0.35\" diffuse=\"0.6 0.6 0.6\" specular=\"0.1 0.1 "
    "0.1\"/>\n"
    "    <quality shadowsize=\"4096\"/>\n"
    "  </visual>\n"
    "\n"
    "  <asset>\n"
    "    <texture name=\"sky\" type=\"skybox\" builtin=\"gradient\" rgb1=\"0.45 0.6 0.8\" "
    "rgb2=\"0.05 0.08 0.12\" width=\"256\" height=\"256\"/>\n"
    "    <texture name=\"checker\" type=\"2d\" builtin=\"checker\" rgb1=\"0.22 0.26 0.3\" "
    "rgb2=\"0.32 0.36 0.4\" mark=\"edge\" markrgb=\"0.5 0.5 0.5\" width=\"512\" "
    "height=\"512\"/>\n"
    "    <material name=\"ground_mat\" texture=\"checker\" texrepeat=\"6 6\" texuniform=\"true\" "
    "reflectance=\"0.1\"/>\n"
    "    <material name=\"wall_mat\" rgba=\"0.45 0.45 0.5 0.35\"/>\n"
    "    <material name=\"box_mat\" rgba=\"0.85 0.45 0.15 1\"/>\n"
    "    <material name=\"sphere_mat\" rgba=\"0.2 0.55 0.85 1\"/>\n"
    "    <material name=\"capsule_mat\" rgba=\"0.3 0.75 0.35 1\"/>\n"
    "    <material name=\"cylinder_mat\" rgba=\"0.8 0.25 0.3 1\"/>\n"
    "    <material name=\"ellipsoid_mat\" rgba=\"0.75 0.65 0.2 1\"/>\n"
    "  </asset>\n"
    "\n"
    "  <default>\n"
    "    <geom condim=\"3\" friction=\"0.7 0.005 0.0001\"/>\n"
    "    <default class=\"box\"><geom type=\"box\" size=\"0.05 0.05 0.05\" material=\"box_mat\"/>"
    "</default>\n"
    "    <default class=\"sphere\"><geom type=\"sphere\" size=\"0.05\" material=\"sphere_mat\"/>"
    "</default>\n"
    "    <default class=\"capsule\"><geom type=\"capsule\" size=\"0.035 0.04\" "
    "material=\"capsule_mat\"/></default>\n"
    "    <default class=\"cylinder\"><geom type=\"cylinder\" size=\"0.05 0.04\" "
    "material=\"cylinder_mat\"/></default>\n"
    "    <default class=\"ellipsoid\"><geom type=\"ellipsoid\" size=\"0.06 0.045 0.035\" "
    "material=\"ellipsoid_mat\"/></default>\n"
    "    <default class=\"static\"><geom type=\"box\" material=\"wall_mat\"/></default>\n"
    "  </default>\n"
    "\n"
    "  <worldbody>\n";

// the light, the ground and four walls around the pile
void AppendFence(std::string& x, int nx, int ny, int nlayers) {
  const double cx = 0.5 * (nx - 1) * kPitch, cy = 0.5 * (ny - 1) * kPitch;
  const double hx = 0.5 * nx * kPitch + 0.25, hy = 0.5 * ny * kPitch + 0.25;  // fenced half-extent
  // walls (half-height wall_h) as tall as the initial pile, so toppling columns stay fenced in
  const double wall_h = 0.5 * (kZ0 + nlayers * kZPitch) + 0.05, wall_t = 0.05;
  Append(x,
         "    <light name=\"sun\" pos=\"%.4f %.4f 4\" dir=\"0 0 -1\" directional=\"true\" "
         "diffuse=\"0.7 0.7 0.7\"/>\n",
         cx, cy);
  Append(x,
         "    <geom name=\"ground\" class=\"static\" pos=\"%.4f %.4f -0.1\" size=\"%.4f %.4f "
         "0.1\" material=\"ground_mat\"/>\n",
         cx, cy, hx + wall_t + 0.5, hy + wall_t + 0.5);
  Append(x,
         "    <geom name=\"wall_xneg\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
         "%.4f\"/>\n",
         cx - hx - wall_t, cy, wall_h, wall_t, hy + 2 * wall_t, wall_h);
  Append(x,
         "    <geom name=\"wall_xpos\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
         "%.4f\"/>\n",
         cx + hx + wall_t, cy, wall_h, wall_t, hy + 2 * wall_t, wall_h);
  Append(x,
         "    <geom name=\"wall_yneg\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
         "%.4f\"/>\n",
         cx, cy - hy - wall_t, wall_h, hx, wall_t, wall_h);
  Append(x,
         "    <geom name=\"wall_ypos\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
         "%.4f\"/>\n",
         cx, cy + hy + wall_t, wall_h, hx, wall_t, wall_h);
  x += "\n";
}

// the free bodies, layer by layer
void AppendBodies(std::string& x, int nx, int ny, int nlayers) {
  static const char* const kType[5] = {"box", "sphere", "capsule", "cylinder", "ellipsoid"};
  for (int k = 0; k < nlayers; ++k) {
    for (int iy = 0; iy < ny; ++iy) {
      for (int ix = 0; ix < nx; ++ix) {
        const int type = (ix + 2 * iy + k) % 5;
        const double px = ix * kPitch + kJitter * Jitter(ix, iy, k, 0);
        const double py = iy * kPitch + kJitter * Jitter(ix, iy, k, 1);
        const double pz = kZ0 + k * kZPitch;
        const double ax = kTilt * Jitter(ix, iy, k, 2);
        const double ay = kTilt * Jitter(ix, iy, k, 3);
        // arbitrary yaw
        const double az = 180.0 * Jitter(ix, iy, k, 4);
        const char* name = kType[type];
        char id[64];
        std::snprintf(id, sizeof(id), "%s_%d_%d_%d", name, ix, iy, k);
        Append(x, "    <body name=\"%s\" pos=\"%.4f %.4f %.4f\" euler=\"%.3f %.3f %.3f\">\n", id,
               px, py, pz, ax, ay, az);
        Append(x, "      <joint name=\"j_%s\" type=\"free\"/>\n", id);
        if (type == 2) {
          // capsule axis is local z: lay it down (90 deg about y) so it rests on its side
          Append(x, "      <geom name=\"g_%s\" class=\"capsule\" euler=\"0 90 0\"/>\n", id);
        } else {
          Append(x, "      <geom name=\"g_%s\" class=\"%s\"/>\n", id, name);
        }
        x += "    </body>\n";
      }
    }
  }
}

}  // namespace

double StackedPrimitivesDataBytes(long nv, long njmax) {
  const double j = static_cast<double>(njmax), v = static_cast<double>(nv);
  return j * (24.0 * v + 12.0 * j);
}

StackSizing StackedPrimitivesSizing(int nx, int ny, int nlayers, int rows_per_contact) {
  nx = std::max(1, nx);
  ny = std::max(1, ny);
  nlayers = std::max(1, nlayers);
  rows_per_contact = std::max(1, rows_per_contact);
  const long nbody = static_cast<long>(nx) * ny * nlayers;
  const long nv = 6 * nbody;
  const double per_body = std::min(4.5, 2.6 + 0.1 * nlayers);
  long nconmax = static_cast<long>(std::ceil(per_body * static_cast<double>(nbody))) + 64;
  nconmax = std::min(nconmax, 100000L);
  long njmax = rows_per_contact * nconmax;
  const double kMaxBytes = 2.0e9;
  if (StackedPrimitivesDataBytes(nv, njmax) > kMaxBytes) {
    // largest njmax with njmax * (24 nv + 12 njmax) <= kMaxBytes
    const double b = 24.0 * static_cast<double>(nv);
    njmax = static_cast<long>((-b + std::sqrt(b * b + 48.0 * kMaxBytes)) / 24.0);
  }
  const double v = static_cast<double>(nv);
  const double nstack = std::max(5.5 * v * v, 4.5 * v * static_cast<double>(njmax)) + 1e5;
  StackSizing s;
  s.nconmax = static_cast<int>(nconmax);
  s.njmax = static_cast<int>(njmax);
  s.nstack = static_cast<int>(std::min(nstack, 268435456.0));
  return s;
}

std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep,
                                 const StackSizing& size, bool elliptic_cone) {
  nx = std::max(1, nx);
  ny = std::max(1, ny);
  nlayers = std::max(1, nlayers);
  if (!(timestep > 0)) timestep = 0.002;

  std::string x;
  x.reserve(2048 + 400 * static_cast<std::size_t>(nx * ny * nlayers));
  Append(x,
         "<!--\n"
         "  stacked primitives: %d x %d columns x %d layers = %d free bodies (boxes, spheres,\n"
         "  capsules, cylinders, ellipsoids) dropped onto a box-geom ground fenced by walls.\n"
         "  Generated by tools/common/gen_stack.cc (StackedPrimitivesXML: nx %d, ny %d, nlayers "
         "%d, h %g).\n"
         "  What it tests   : dense contact (every primitive pair type, box ground), condim 3.\n"
         "  Names           : bodies <type>_<ix>_<iy>_<layer>, geoms g_<...>, joints j_<...>;\n"
         "                    static geoms ground (top face at z = 0), wall_xneg/xpos/yneg/ypos.\n"
         "  Quantities read : d->ncon, d->nefc, step time; no body should fall below z = 0.\n"
         "  Sizes           : <size> preallocates contacts/rows for MuJoCo 2.2.2 (see "
         "mjcf_models/README.md).\n"
         "-->\n",
         nx, ny, nlayers, nx * ny * nlayers, nx, ny, nlayers, timestep);
  Append(x, "<mujoco model=\"stacked_primitives_%dx%dx%d\">\n", nx, ny, nlayers);
  x += "  <compiler angle=\"degree\"/>\n";
  Append(x, "  <option timestep=\"%g\" integrator=\"Euler\"%s/>\n", timestep,
         elliptic_cone ? " cone=\"elliptic\"" : "");
  Append(x, "  <size nconmax=\"%d\" njmax=\"%d\" nstack=\"%d\"/>\n", size.nconmax, size.njmax,
         size.nstack);
  x += kStatic;
  AppendFence(x, nx, ny, nlayers);
  AppendBodies(x, nx, ny, nlayers);

  x += "  </worldbody>\n"
       "</mujoco>\n";
  return x;
}

std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep, bool elliptic_cone) {
  return StackedPrimitivesXML(nx, ny, nlayers, timestep,
                              StackedPrimitivesSizing(nx, ny, nlayers, elliptic_cone ? 3 : 4),
                              elliptic_cone);
}

std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep) {
  return StackedPrimitivesXML(nx, ny, nlayers, timestep, false);
}

}  // namespace contactkit::tools
