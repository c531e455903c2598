// Copyright 2026 The contactkit developers.
//
// ck-viewer under Xvfb: record a few frames of a bundled model headless, read the last PNG back and
// check that it is not blank, that both viewports rendered the scene, that the same solver on both
// sides gives the same picture and that two different solvers give different ones.
#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "support/fixture.h"
#include "tests/tools/process.h"

namespace contactkit::test {
namespace {

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;  // rows top-down
  const unsigned char* at(int x, int y) const {
    return &rgb[3 * (static_cast<size_t>(y) * width + x)];
  }
};

bool ReadPng(const std::string& path, Image* img) {
  png_image p;
  std::memset(&p, 0, sizeof(p));
  p.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&p, path.c_str())) return false;
  p.format = PNG_FORMAT_RGB;
  img->width = static_cast<int>(p.width);
  img->height = static_cast<int>(p.height);
  img->rgb.resize(PNG_IMAGE_SIZE(p));
  return png_image_finish_read(&p, nullptr, img->rgb.data(), 0, nullptr) != 0;
}

// standard deviation of the grey level over a rectangle
double GreyStd(const Image& img, int x0, int y0, int w, int h) {
  double s = 0, s2 = 0;
  for (int y = y0; y < y0 + h; y++) {
    for (int x = x0; x < x0 + w; x++) {
      const unsigned char* p = img.at(x, y);
      const double g = (p[0] + p[1] + p[2]) / 3.0;
      s += g;
      s2 += g * g;
    }
  }
  const double n = static_cast<double>(w) * h, mean = s / n;
  return std::sqrt(std::max(0.0, s2 / n - mean * mean));
}

// fraction of pixels of two equal rectangles whose colours differ by more than 40 in a channel
double DifferentFraction(const Image& img, int xa, int xb, int y0, int w, int h) {
  long diff = 0;
  for (int y = y0; y < y0 + h; y++) {
    for (int x = 0; x < w; x++) {
      const unsigned char* a = img.at(xa + x, y);
      const unsigned char* b = img.at(xb + x, y);
      int d = 0;
      for (int c = 0; c < 3; c++) d = std::max(d, std::abs(a[c] - b[c]));
      if (d > 40) diff++;
    }
  }
  return static_cast<double>(diff) / (static_cast<double>(w) * h);
}

class ViewerTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef CK_VIEWER
    GTEST_SKIP() << "ck-viewer is not built (needs libglfw3-dev, OpenGL and libpng-dev)";
#else
    if (!HaveProgram("xvfb-run")) GTEST_SKIP() << "xvfb-run is absent (Debian package xvfb)";
#endif
  }

  // record frames of model with the given solvers; the last frame, or an empty image on failure
  Image Record(const std::string& model, const std::string& left, const std::string& right,
               int frames, ProcessResult* result) {
    Image img;
#ifdef CK_VIEWER
    const std::string dir = MakeTempDir("viewer");
    // a display number of our own (tests run in parallel; -a moves on from it if taken)
    const std::string display = std::to_string(100 + getpid() % 800);
    const std::vector<std::string> argv = {"xvfb-run", "-a",
                                           "-n",       display,
                                           "-s",       "-screen 0 1024x768x24",
                                           CK_VIEWER,  model,
                                           "--left",   left,
                                           "--right",  right,
                                           "--record", dir,
                                           "--frames", std::to_string(frames),
                                           "--fps",    "20",
                                           "--size",   "800x600",
                                           "--format", "png"};
    *result = RunProcess(argv, {{ "ASAN_OPTIONS", "detect_leaks=0" }}, "viewer_run");
    if (result->status != 0 &&
        (result->err.find("cannot create an OpenGL window") != std::string::npos ||
         result->err.find("cannot initialize GLFW") != std::string::npos)) {
      no_gl_ = true;
    }
    char name[32];
    std::snprintf(name, sizeof(name), "/frame_%05d.png", frames - 1);
    if (result->status == 0 && !ReadPng(dir + name, &img)) img = Image();
    for (int f = 0; f < frames; f++) {
      std::snprintf(name, sizeof(name), "/frame_%05d.png", f);
      std::remove((dir + name).c_str());
    }
    rmdir(dir.c_str());
#endif
    return img;
  }

  bool no_gl_ = false;  // Xvfb started but no OpenGL context could be made
};

// the 3D region of each viewport without the overlay at the top and the sliders at the bottom
constexpr int kTop = 180, kBottom = 536, kHalf = 400;

TEST_F(ViewerTest, BothViewportsRenderTheScene) {
  ProcessResult r;
  const Image img = Record(BundledModel("stacked_primitives.xml"), "mujoco", "mujoco",
                           std::getenv("CK_TEST_QUICK") ? 4 : 10, &r);
  if (no_gl_) GTEST_SKIP() << "no OpenGL context under Xvfb (install libgl1-mesa-dri): " << r.err;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  ASSERT_EQ(img.width, 800) << "no readable frame: " << r.out << r.err;
  ASSERT_EQ(img.height, 600);
  EXPECT_GT(GreyStd(img, 0, 0, img.width, img.height), 10) << "blank frame";
  // each viewport shows the scene (sky, floor, bodies)
  EXPECT_GT(GreyStd(img, 0, kTop, kHalf - 1, kBottom - kTop), 8) << "left viewport blank";
  EXPECT_GT(GreyStd(img, kHalf + 1, kTop, kHalf - 1, kBottom - kTop), 8) << "right viewport blank";
  // the same solver on both sides: the same picture (within rasterization noise)
  EXPECT_LT(DifferentFraction(img, 0, kHalf + 1, kTop, kHalf - 1, kBottom - kTop), 0.002);
  EXPECT_NE(r.out.find("left mujoco, right mujoco"), std::string::npos) << r.out;
}

TEST_F(ViewerTest, DifferentSolversDrawDifferentPiles) {
  int other = -1;
  for (int s = 1; s < ckNSOLVER && other < 0; s++) {
    if (ck_solverAvailable(s)) other = s;
  }
  if (other < 0) {
    GTEST_SKIP() << "only the 'mujoco' solver is in this build: nothing different to compare yet";
  }
  if (std::getenv("CK_TEST_QUICK")) GTEST_SKIP() << "CK_TEST_QUICK: too few frames to diverge";
  ProcessResult r;
  const Image img =
      Record(BundledModel("stacked_primitives.xml"), "mujoco", ck_solverName(other), 20, &r);
  if (no_gl_) GTEST_SKIP() << "no OpenGL context under Xvfb (install libgl1-mesa-dri): " << r.err;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  ASSERT_EQ(img.width, 800) << r.out << r.err;
  EXPECT_GT(GreyStd(img, kHalf + 1, kTop, kHalf - 1, kBottom - kTop), 8) << "right viewport blank";
  // after a second of a dense drop the piles differ visibly
  EXPECT_GT(DifferentFraction(img, 0, kHalf + 1, kTop, kHalf - 1, kBottom - kTop), 0.002)
      << "left (mujoco) and right (" << ck_solverName(other) << ") look the same";
}

TEST_F(ViewerTest, BadInputIsNamed) {
#ifdef CK_VIEWER
  ProcessResult r = RunProcess({CK_VIEWER, "box_on_plane", "--left", "pgs"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown solver 'pgs'; allowed: mujoco, ipm, comfree, lcp"),
            std::string::npos)
      << r.err;
  r = RunProcess({CK_VIEWER, "no_such_model"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("model 'no_such_model' not found"), std::string::npos) << r.err;
  r = RunProcess({CK_VIEWER, "box_on_plane", "--frames", "0"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--frames takes a positive integer"), std::string::npos) << r.err;
  r = RunProcess({CK_VIEWER, "box_on_plane", "--format", "gif"});
  EXPECT_NE(r.err.find("allowed: auto, png, video"), std::string::npos) << r.err;
  r = RunProcess({CK_VIEWER, "box_on_plane", "--sett", "x"});
  EXPECT_NE(r.err.find("unknown option '--sett'"), std::string::npos) << r.err;
  r = RunProcess({CK_VIEWER, "box_on_plane", "--size", "10x10"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "ck-viewer: --size: want WIDTHxHEIGHT (64..8192), got '10x10'\n");
  r = RunProcess({CK_VIEWER, "box_on_plane", "--fps"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "ck-viewer: --fps needs a value\n");
  r = RunProcess({CK_VIEWER, "box_on_plane", "box_sliding"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("more than one model given"), std::string::npos) << r.err;
  r = RunProcess({CK_VIEWER, "--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("usage: ck-viewer MODEL [options]", 0), 0u) << r.out;
#endif
}

}  // namespace
}  // namespace contactkit::test
