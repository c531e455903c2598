// Copyright 2026 The contactkit developers.
//
// A cloth-like grid of spheres pinned at two corners, built from plain MJCF so that it loads on
// every MuJoCo version: what MuJoCo 2.x's <composite type="grid"> made of `grid2pin.xml` (slide
// joints per body, neighbours tied by spatial tendons held at their length by equality
// constraints), a composite type that MuJoCo 3.x no longer has.
#ifndef CONTACTKIT_TESTS_SUPPORT_GRID_SCENE_H_
#define CONTACTKIT_TESTS_SUPPORT_GRID_SCENE_H_

#include <string>

namespace contactkit::test {

// MJCF of an n x n grid (spacing in m) 1 m above a floor, corners (0, 0) and (n-1, 0) pinned,
// falling onto a tilted capsule as in MuJoCo's composite scene
std::string GridPinnedXML(int n = 9, double spacing = 0.05);

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_SUPPORT_GRID_SCENE_H_
