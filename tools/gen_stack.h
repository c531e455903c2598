// Copyright 2026 The contactkit developers.
//
// Header-only generator of the "stacked primitives" MJCF scene used to benchmark step time against
// contact count. The scene is an nx x ny grid of columns, each nlayers bodies high, of five
// primitive types (box, sphere, capsule, cylinder, ellipsoid; the type of body (ix, iy, k) is
// (ix + 2 iy + k) mod 5, so neighbours differ). Every body has a free joint and a slightly jittered
// and tilted pose (deterministic, platform independent), so the columns topple into each other
// while falling onto a box-geom ground ("ground", top face at z = 0) fenced by four transparent box
// walls as tall as the initial pile. All geoms use condim 3, friction 0.7; integrator Euler;
// MuJoCo's default pyramidal cone unless the elliptic variant is requested.
// mjcf_models/stacked_primitives.xml is StackedPrimitivesXML(5, 4, 3, 0.002, {600, 2400, 4000000}).
//
// Names: bodies "<type>_<ix>_<iy>_<k>" (e.g. "box_0_0_0", "sphere_1_0_0"), geoms the same with the
// prefix "g_", free joints the same with the prefix "j_"; static geoms "ground", "wall_xneg",
// "wall_xpos", "wall_yneg", "wall_ypos".
//
// Sizing for MuJoCo 2.2.2, which preallocates contacts and constraint rows (see
// StackedPrimitivesSizing). Two 2.2.2 limits shape it:
//  - mjData's main buffer holds the dense efc_J/efc_JT (njmax x nv) and efc_AR (njmax x njmax)
//    matrices, about njmax * (24 nv + 12 njmax) bytes, and its size is an int: above 2^31 bytes
//    mj_loadXML/mj_makeData fail with "could not create mjData". So a scene with nv ~ 4000 cannot
//    have more than ~9400 rows, i.e. ~2350 pyramidal (4-row) or ~3100 elliptic (3-row) contacts.
//  - Newton (the default solver) factors a dense nv x nv Hessian: ~5 nv^2 mjtNums of stack and
//    O(nv^3) time per iteration (PGS needs ~4 nv nefc mjtNums of stack), i.e. seconds per step
//    above nv ~ 3000. CG (m->opt.solver = mjSOL_CG) steps the 2000-contact scenes in ~25 ms.
//
// Contacts after settling, measured with MuJoCo 2.2.2 (pyramidal cone, h = 0.002, solver CG,
// mean ncon over steps 900..1000 of a 1000-step run; peak = max ncon over the run; no warnings;
// Newton gives the same counts within a few percent; Newton's stack adds ~5 nv^2 doubles of
// resident memory on top of the buffer, e.g. 0.7 GB for 7x7x14):
//    nx ny nlayers  bodies   contacts  peak   CG ms/step  mjData buffer
//     3  2    1         6        11      12       0.04        <1 MB
//     3  3    2        18        38      40       0.25        <1 MB
//     5  4    3        60       127     131       1.1         19 MB   (~100)
//     6  6    4       144       321     332       3.0         0.1 GB
//     7  7    4       196       466     474       4.7         0.15 GB (~500)
//     8  8    4       256       603     613       6.2         0.25 GB
//     8  8    6       384       974     986      11.8         0.6 GB  (~1000)
//    10 10    5       500      1238    1257      13.2         1.0 GB
//     8  8    8       512      1398    1416      16.1         1.1 GB
//     6  6   18       648      1924    1943      24.9         2.0 GB
//     7  7   14       686      2027    2059      25.1         2.0 GB  (2000+)
//     7  7   15       735      2172    2213      26.1         2.0 GB
//     6  6   20       720      2201    2234      28.3         2.0 GB
// Counts keep creeping up while the piles compact (7x7x14: 2197 at 4 s, 2287 at 6 s). From 6x6x18
// on njmax is clamped by the 2^31-byte limit (9434 rows = 2358 pyramidal contacts for 7x7x14):
// after ~6 s (pyramidal) these scenes reach the limit and MuJoCo would report mjWARN_CNSTRFULL. For
// long runs at 2000+ contacts use the elliptic variant (7x7x14 elliptic: 2176 contacts, 6528 of
// 9434 rows at 6 s). A Newton step of 7x7x14 takes 3-7 s (dense nv = 4116 Hessian), so benchmark
// MuJoCo's own solver there with CG.
//
// Usage:
//   std::string xml = contactkit::tools::StackedPrimitivesXML(8, 8, 4, 0.002);
//   // MuJoCo 2.2.2 loads MJCF from files (or an mjVFS): write the string to a file, mj_loadXML it.
#ifndef CONTACTKIT_TOOLS_GEN_STACK_H_
#define CONTACTKIT_TOOLS_GEN_STACK_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace contactkit::tools {

// preallocation sizes written into <size> of the generated scene
struct StackSizing {
  int nconmax;  // contacts
  int njmax;    // constraint rows
  int nstack;   // mjtNums in mjData's stack
};

// Approximate size in bytes of MuJoCo 2.2.2's mjData main buffer (an int: must stay below 2^31),
// dominated by efc_J/efc_JT (njmax x nv doubles + int column indices) and efc_AR (njmax x njmax
// doubles + int column indices).
inline double StackedPrimitivesDataBytes(long nv, long njmax) {
  const double j = static_cast<double>(njmax), v = static_cast<double>(nv);
  return j * (24.0 * v + 12.0 * j);
}

// Sizes for an nx x ny x nlayers scene, calibrated on MuJoCo 2.2.2:
//  - contacts: the count grows with the pile height and with time as piles compact, from 2.0 per
//    body (one layer) to 3.0 (14-20 layers, 2 s) and 3.3 (7x7x14, 6 s); we allow
//    2.6 + 0.1 * nlayers per body (at most 4.5), plus 64;
//  - rows: rows_per_contact per contact (4: condim 3 with the pyramidal cone; 3: elliptic), but
//    njmax is clamped so that the mjData buffer stays below 2.0e9 bytes (see above). The clamp
//    bites from ~1900 pyramidal contacts on, so the largest scenes run with less headroom;
//  - stack: Newton uses ~5 nv^2 + 15 nefc mjtNums, PGS ~4 nv nefc, CG far less; we allow
//    max(5.5 nv^2, 4.5 nv njmax) + 1e5, capped at 2^28 (2 GB). Stack pages are only touched when
//    used, so the generous PGS allowance costs address space, not resident memory.
inline StackSizing StackedPrimitivesSizing(int nx, int ny, int nlayers, int rows_per_contact = 4) {
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

namespace detail {

// deterministic uniform number in [-1, 1] from a few integers (splitmix64 finaliser)
inline double Jitter(int a, int b, int c, int salt) {
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
inline void Append(std::string& out, const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  if (n <= 0) return;
  const std::size_t old = out.size();
  out.resize(old + static_cast<std::size_t>(n) + 1);
  std::snprintf(&out[old], static_cast<std::size_t>(n) + 1, fmt, args...);
  out.resize(old + static_cast<std::size_t>(n));
}

}  // namespace detail

// MJCF text of the stacked-primitives scene: nx x ny columns of nlayers free bodies each, with
// the given <size> preallocation; elliptic_cone selects cone="elliptic" in <option>.
// Non-positive counts are treated as 1; a non-positive timestep as 0.002.
inline std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep,
                                        const StackSizing& size, bool elliptic_cone = false) {
  nx = std::max(1, nx);
  ny = std::max(1, ny);
  nlayers = std::max(1, nlayers);
  if (!(timestep > 0)) timestep = 0.002;

  // layout: with these tilts a body's half-extent is at most 0.081 m horizontally (box; 0.075 for
  // the others) and 0.072 m vertically, and two boxes are never horizontal neighbours in a layer,
  // so no two bodies touch at t = 0 (checked up to 20 x 20 x 10)
  const double pitch = 0.18;   // horizontal distance between columns
  const double jitter = 0.01;  // +- horizontal jitter of each body
  const double tilt = 15.0;    // +- degrees of tilt about x and y
  const double zpitch = 0.17;  // vertical distance between layers
  const double z0 = 0.10;      // centre height of the bottom layer (>= 1.4 cm clearance)
  const double cx = 0.5 * (nx - 1) * pitch, cy = 0.5 * (ny - 1) * pitch;
  const double hx = 0.5 * nx * pitch + 0.25, hy = 0.5 * ny * pitch + 0.25;  // fenced half-extent
  // walls (half-height wall_h) as tall as the initial pile, so toppling columns stay fenced in
  const double wall_h = 0.5 * (z0 + nlayers * zpitch) + 0.05, wall_t = 0.05;

  std::string x;
  x.reserve(2048 + 400 * static_cast<std::size_t>(nx * ny * nlayers));
  detail::Append(
      x,
      "<!--\n"
      "  stacked primitives: %d x %d columns x %d layers = %d free bodies (boxes, spheres,\n"
      "  capsules, cylinders, ellipsoids) dropped onto a box-geom ground fenced by walls.\n"
      "  Generated by tools/gen_stack.h (StackedPrimitivesXML: nx %d, ny %d, nlayers %d, h %g).\n"
      "  What it tests   : dense contact (every primitive pair type, box ground), condim 3.\n"
      "  Names           : bodies <type>_<ix>_<iy>_<layer>, geoms g_<...>, joints j_<...>;\n"
      "                    static geoms ground (top face at z = 0), wall_xneg/xpos/yneg/ypos.\n"
      "  Quantities read : d->ncon, d->nefc, step time; no body should fall below z = 0.\n"
      "  Sizes           : <size> preallocates contacts/rows for MuJoCo 2.2.2 (see gen_stack.h).\n"
      "-->\n",
      nx, ny, nlayers, nx * ny * nlayers, nx, ny, nlayers, timestep);
  detail::Append(x, "<mujoco model=\"stacked_primitives_%dx%dx%d\">\n", nx, ny, nlayers);
  x += "  <compiler angle=\"degree\"/>\n";
  detail::Append(x, "  <option timestep=\"%g\" integrator=\"Euler\"%s/>\n", timestep,
                 elliptic_cone ? " cone=\"elliptic\"" : "");
  detail::Append(x, "  <size nconmax=\"%d\" njmax=\"%d\" nstack=\"%d\"/>\n", size.nconmax,
                 size.njmax, size.nstack);
  x +=
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
  detail::Append(x,
                 "    <light name=\"sun\" pos=\"%.4f %.4f 4\" dir=\"0 0 -1\" directional=\"true\" "
                 "diffuse=\"0.7 0.7 0.7\"/>\n",
                 cx, cy);
  detail::Append(
      x,
      "    <geom name=\"ground\" class=\"static\" pos=\"%.4f %.4f -0.1\" size=\"%.4f %.4f "
      "0.1\" material=\"ground_mat\"/>\n",
      cx, cy, hx + wall_t + 0.5, hy + wall_t + 0.5);
  detail::Append(
      x,
      "    <geom name=\"wall_xneg\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
      "%.4f\"/>\n",
      cx - hx - wall_t, cy, wall_h, wall_t, hy + 2 * wall_t, wall_h);
  detail::Append(
      x,
      "    <geom name=\"wall_xpos\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
      "%.4f\"/>\n",
      cx + hx + wall_t, cy, wall_h, wall_t, hy + 2 * wall_t, wall_h);
  detail::Append(
      x,
      "    <geom name=\"wall_yneg\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
      "%.4f\"/>\n",
      cx, cy - hy - wall_t, wall_h, hx, wall_t, wall_h);
  detail::Append(
      x,
      "    <geom name=\"wall_ypos\" class=\"static\" pos=\"%.4f %.4f %.4f\" size=\"%.4f %.4f "
      "%.4f\"/>\n",
      cx, cy + hy + wall_t, wall_h, hx, wall_t, wall_h);
  x += "\n";

  static const char* const kType[5] = {"box", "sphere", "capsule", "cylinder", "ellipsoid"};
  for (int k = 0; k < nlayers; ++k) {
    for (int iy = 0; iy < ny; ++iy) {
      for (int ix = 0; ix < nx; ++ix) {
        const int type = (ix + 2 * iy + k) % 5;
        const double px = ix * pitch + jitter * detail::Jitter(ix, iy, k, 0);
        const double py = iy * pitch + jitter * detail::Jitter(ix, iy, k, 1);
        const double pz = z0 + k * zpitch;
        const double ax = tilt * detail::Jitter(ix, iy, k, 2);
        const double ay = tilt * detail::Jitter(ix, iy, k, 3);
        // arbitrary yaw
        const double az = 180.0 * detail::Jitter(ix, iy, k, 4);
        const char* name = kType[type];
        char id[64];
        std::snprintf(id, sizeof(id), "%s_%d_%d_%d", name, ix, iy, k);
        detail::Append(x,
                       "    <body name=\"%s\" pos=\"%.4f %.4f %.4f\" euler=\"%.3f %.3f %.3f\">\n",
                       id, px, py, pz, ax, ay, az);
        detail::Append(x, "      <joint name=\"j_%s\" type=\"free\"/>\n", id);
        if (type == 2) {
          // capsule axis is local z: lay it down (90 deg about y) so it rests on its side
          detail::Append(x, "      <geom name=\"g_%s\" class=\"capsule\" euler=\"0 90 0\"/>\n", id);
        } else {
          detail::Append(x, "      <geom name=\"g_%s\" class=\"%s\"/>\n", id, name);
        }
        x += "    </body>\n";
      }
    }
  }
  x += "  </worldbody>\n"
       "</mujoco>\n";
  return x;
}

// Same, sized by StackedPrimitivesSizing (4 rows per contact, or 3 with the elliptic cone).
inline std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep,
                                        bool elliptic_cone) {
  return StackedPrimitivesXML(nx, ny, nlayers, timestep,
                              StackedPrimitivesSizing(nx, ny, nlayers, elliptic_cone ? 3 : 4),
                              elliptic_cone);
}

// The benchmark scene: pyramidal cone (MuJoCo's default), sized by StackedPrimitivesSizing.
inline std::string StackedPrimitivesXML(int nx, int ny, int nlayers, double timestep) {
  return StackedPrimitivesXML(nx, ny, nlayers, timestep, false);
}

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_GEN_STACK_H_
