// Copyright 2026 The contactkit developers.
//
// ck-viewer: one model simulated under two solvers side by side from the same initial state, drawn
// with MuJoCo's renderer (mjv_/mjr_) in a GLFW window, or recorded headless to PNG frames or video.
#include <GLFW/glfw3.h>
#include <mujoco/mujoco.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/step/compat.h"
#include "tools/common/command_line.h"
#include "tools/common/tool_util.h"
#include "tools/viewer/frame_writer.h"

namespace contactkit::viewer {
namespace {

using tools::Fmt;

const char kUsage[] =
    "usage: ck-viewer MODEL [options]\n"
    "\n"
    "MODEL is a path, a bundled model name (e.g. stacked_primitives, box_sliding) or one of\n"
    "MuJoCo's examples (humanoid, humanoid100, 22_humanoids) from the folder in the\n"
    "environment variable CK_MUJOCO_MODELS (default: the build's, " CK_MUJOCO_MODELS
    ").\n"
    "\n"
    "options:\n"
    "  --left S            solver of the left view (default mujoco)\n"
    "  --right S           solver of the right view (default: ipm if available, else the first\n"
    "                      other available solver, else the model's)\n"
    "  --set KEY=VALUE     a setting for both views (repeatable), e.g. --set kappa_tol=1e-6\n"
    "  --record DIR        render headless into DIR and exit: PNG frames, or a video with ffmpeg\n"
    "  --frames N          frames to record (default 90)\n"
    "  --fps F             recorded frames per second of simulated time (default 30)\n"
    "  --format F          auto (video if ffmpeg is installed, else PNG), png or video\n"
    "  --size WxH          window or frame size in pixels (default 1280x720)\n"
    "  --paused            start paused (interactive)\n"
    "  --help              this text\n"
    "\n"
    "keys: space pause, right arrow single step (paused), backspace reset, 1 / 2 next solver\n"
    "left / right, C contact points, F contact forces, H help, Esc quit. Mouse as in MuJoCo's\n"
    "simulate: left drag rotates, right drag moves, scroll zooms; double-click selects a body,\n"
    "Ctrl + left drag rotates it and Ctrl + right drag pulls it (in both views). Sliders at the\n"
    "bottom set kappa_tol (ipm), stiffness and damping (comfree) and restitution (lcp).\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ck-viewer: %s\n", msg.c_str());
  return 2;
}

// one side of the comparison: its own mjData, handle and scene
struct Side {
  mjData* d = nullptr;
  ckHandle* ck = nullptr;
  int solver = ckSOL_MUJOCO;
  mjvScene scn;
  double step_ms = 0;          // smoothed wall time per step (ms)
  int iterations = 0;          // last step
  int ncon = 0;                // last step
  double penetration = 0;      // last step (m)
  double max_penetration = 0;  // since reset (m)
  int status = 0;
  std::string error;  // last settings error
};

// a slider for one setting (log scale for tolerances)
struct Slider {
  const char* key;    // setting key
  const char* label;  // shown text
  double lo, hi;      // range
  bool log;           // logarithmic
  double value;
  mjrRect rect;  // bar, in framebuffer pixels (bottom-left origin)
};

class App {
 public:
  ~App();
  int Main(int argc, char** argv);

 private:
  int ParseArgs(int argc, char** argv, tools::CommandLine* cl);  // -1 to go on, else exit code
  bool Init(std::string* error);
  void Reset();
  void StepBoth();
  void Render(const mjrRect& full);
  void RenderSide(int i, const mjrRect& rect);
  void RenderSliders(const mjrRect& panel);
  bool SetSolver(int side, int solver);
  void ApplySliders();
  int NextSolver(int solver) const;
  int Record();
  int Interactive();

  // GLFW callbacks
  static App* From(GLFWwindow* w) { return static_cast<App*>(glfwGetWindowUserPointer(w)); }
  void OnKey(int key, int action, int mods);
  void OnButton(int button, int action, int mods);
  void OnMove(double x, double y);
  void OnScroll(double dy);
  int SideAt(double fx) const;  // side under framebuffer x
  int SliderAt(double fx, double fy) const;
  void SetSliderFromX(int i, double fx);
  void FramebufferPos(double wx, double wy, double* fx, double* fy) const;

  // options
  std::string model_arg_, record_dir_;
  std::vector<std::string> sets_;
  int left_ = ckSOL_MUJOCO, right_ = -1;
  int frames_ = 90, fps_ = 30, width_ = 1280, height_ = 720;
  FrameWriter::Format format_ = FrameWriter::kPng;
  bool paused_ = false;

  // state
  mjModel* m_ = nullptr;
  ckSettings base_;
  Side side_[2];
  GLFWwindow* window_ = nullptr;
  mjvCamera cam_;
  mjvOption opt_;
  mjvPerturb pert_;
  mjrContext con_;
  bool context_ = false;
  std::vector<Slider> sliders_;
  bool help_ = false;
  int key_ = -1;

  // mouse
  bool left_down_ = false, right_down_ = false, middle_down_ = false;
  double mx_ = 0, my_ = 0;  // last framebuffer position (top-left origin)
  int drag_slider_ = -1, drag_side_ = 0;
  double last_click_ = -1;
  int fb_width_ = 0, fb_height_ = 0, panel_height_ = 0;
};

App::~App() {
  for (Side& s : side_) {
    if (context_) mjv_freeScene(&s.scn);
    mj_deleteData(s.d);
    ck_free(s.ck);
  }
  if (context_) mjr_freeContext(&con_);
  if (window_) glfwDestroyWindow(window_);
  if (window_ || context_) glfwTerminate();
  mj_deleteModel(m_);
}

int App::NextSolver(int solver) const {
  for (int k = 1; k <= ckNSOLVER; k++) {
    const int s = (solver + k) % ckNSOLVER;
    if (ck_solverAvailable(s)) return s;
  }
  return solver;
}

bool App::SetSolver(int i, int solver) {
  ckSettings s = base_;
  s.solver = solver;
  s.deriv.enabled = 0;  // the viewer only simulates
  for (const Slider& sl : sliders_) {
    char err[256];
    ck_setSetting(&s, sl.key, Fmt(sl.value, "%.17g").c_str(), err, sizeof(err));
  }
  char err[1024] = "";
  Side& side = side_[i];
  if (!side.ck) {
    side.ck = ck_make(m_, &s, err, sizeof(err));
  } else if (ck_setSettings(side.ck, m_, &s, err, sizeof(err)) != 0) {
    side.error = err;
    return false;
  }
  if (!side.ck) {
    side.error = err;
    return false;
  }
  side.solver = solver;
  side.error.clear();
  return true;
}

void App::ApplySliders() {
  for (int i = 0; i < 2; i++) SetSolver(i, side_[i].solver);
}

void App::Reset() {
  for (Side& s : side_) {
    mj_resetData(m_, s.d);
    if (m_->nkey > 0) mj_resetDataKeyframe(m_, s.d, 0);
    mj_forward(m_, s.d);
    s.step_ms = 0;
    s.max_penetration = 0;
  }
}

void App::StepBoth() {
  for (Side& s : side_) {
    // perturbation from the mouse, the same for both views
    mju_zero(s.d->xfrc_applied, 6 * m_->nbody);
    mjv_applyPerturbPose(m_, s.d, &pert_, 0);
    mjv_applyPerturbForce(m_, s.d, &pert_);
    const auto t0 = std::chrono::steady_clock::now();
    ck_step(s.ck, m_, s.d);
    const double ms =
        1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    s.step_ms = s.step_ms > 0 ? 0.95 * s.step_ms + 0.05 * ms : ms;
    const ckStats* st = ck_stats(s.ck);
    s.iterations = st->iterations;
    s.ncon = st->ncon;
    s.penetration = st->max_penetration;
    s.max_penetration = std::max(s.max_penetration, s.penetration);
    s.status = st->status;
  }
}

bool App::Init(std::string* error) {
  m_ = tools::LoadModel(model_arg_, error);
  if (!m_) return false;
  if (ck_settingsFromModel(m_, &base_, nullptr, 0) < 0) ck_defaultSettings(&base_);
  if (!tools::ApplySets(sets_, &base_, error)) return false;
  sliders_ = {
      {"kappa_tol", "ipm kappa", 1e-12, 1e-2, true, base_.ipm.kappa_tol, {}},
      {"stiffness", "comfree stiffness", 0.01, 1.0, false, base_.comfree.stiffness, {}},
      {"damping", "comfree damping", 0.0, 0.05, false, base_.comfree.damping, {}},
      {"restitution", "lcp restitution", 0.0, 1.0, false, base_.lcp.restitution, {}},
  };
  if (right_ < 0) {
    right_ = ck_solverAvailable(ckSOL_IPM) ? ckSOL_IPM : NextSolver(left_);
    if (right_ == left_) right_ = base_.solver;
  }
  for (int i = 0; i < 2; i++) {
    side_[i].d = mj_makeData(m_);
    if (!side_[i].d) {
      *error = "could not allocate mjData";
      return false;
    }
    if (!SetSolver(i, i == 0 ? left_ : right_)) {
      *error = side_[i].error;
      return false;
    }
  }
  Reset();

  // window and OpenGL context (hidden when recording)
  if (!glfwInit()) {
    *error = "cannot initialize GLFW: no display (set DISPLAY, or run headless under xvfb-run)";
    return false;
  }
  glfwWindowHint(GLFW_SAMPLES, 4);
  if (!record_dir_.empty()) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  window_ = glfwCreateWindow(width_, height_, "ck-viewer", nullptr, nullptr);
  if (!window_) {
    *error = "cannot create an OpenGL window (is an OpenGL driver such as Mesa installed?)";
    return false;
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(record_dir_.empty() ? 1 : 0);

  mjv_defaultCamera(&cam_);
  mjv_defaultFreeCamera(m_, &cam_);
  mjv_defaultOption(&opt_);
  opt_.flags[mjVIS_CONTACTPOINT] = 1;
  opt_.flags[mjVIS_CONTACTFORCE] = 1;
  mjv_defaultPerturb(&pert_);
  if (!record_dir_.empty()) {
    // the offscreen buffer must hold the whole frame
    m_->vis.global.offwidth = std::max(m_->vis.global.offwidth, width_);
    m_->vis.global.offheight = std::max(m_->vis.global.offheight, height_);
  }
  mjr_defaultContext(&con_);
  mjr_makeContext(m_, &con_, mjFONTSCALE_100);
  for (Side& s : side_) {
    mjv_defaultScene(&s.scn);
    mjv_makeScene(m_, &s.scn, 4000);
  }
  context_ = true;
  if (!record_dir_.empty() && (con_.offWidth < width_ || con_.offHeight < height_)) {
    *error = "offscreen buffer is smaller than the frame";
    return false;
  }
  return true;
}

void App::RenderSide(int i, const mjrRect& rect) {
  Side& s = side_[i];
  mjv_updateScene(m_, s.d, &opt_, &pert_, &cam_, mjCAT_ALL, &s.scn);
  mjr_render(rect, &s.scn, &con_);

  // overlay: solver and statistics
  std::string title = "solver\nstep time\niterations\ncontacts\npenetration\nmax penetration\ntime";
  std::string values = std::string(ck_solverName(s.solver)) + "\n" + Fmt(s.step_ms, "%.3f") +
                       " ms\n" + std::to_string(s.iterations) + "\n" + std::to_string(s.ncon) +
                       "\n" + Fmt(1e3 * s.penetration, "%.3g") + " mm\n" +
                       Fmt(1e3 * s.max_penetration, "%.3g") + " mm\n" + Fmt(s.d->time, "%.2f") +
                       " s";
  if (paused_) {
    title += "\n";
    values += "\npaused";
  }
  if (!s.error.empty()) {
    title += "\nerror";
    values += "\n" + s.error.substr(0, 60);
  }
  mjr_overlay(mjFONT_NORMAL, mjGRID_TOPLEFT, rect, title.c_str(), values.c_str(), &con_);
  mjr_overlay(mjFONT_BIG, mjGRID_TOPRIGHT, rect, i == 0 ? "left [1]" : "right [2]", nullptr, &con_);
}

void App::RenderSliders(const mjrRect& panel) {
  mjr_rectangle(panel, 0.12f, 0.12f, 0.14f, 1);
  const int n = static_cast<int>(sliders_.size());
  const int cols = 2, rows = (n + cols - 1) / cols;
  const int pad = 6, cw = panel.width / cols, rh = (panel.height - pad) / std::max(rows, 1);
  for (int k = 0; k < n; k++) {
    Slider& sl = sliders_[k];
    const int c = k % cols, r = k / cols;
    mjrRect bar = {panel.left + c * cw + pad, panel.bottom + panel.height - (r + 1) * rh,
                   cw - 2 * pad, rh - pad};
    sl.rect = bar;
    const double t = sl.log ? (std::log10(sl.value) - std::log10(sl.lo)) /
                                  (std::log10(sl.hi) - std::log10(sl.lo))
                            : (sl.value - sl.lo) / (sl.hi - sl.lo);
    mjrRect fill = bar;
    fill.width = static_cast<int>(std::clamp(t, 0.0, 1.0) * bar.width);
    mjr_rectangle(bar, 0.25f, 0.25f, 0.3f, 1);
    if (fill.width > 0) mjr_rectangle(fill, 0.2f, 0.45f, 0.7f, 1);
    const std::string text = std::string(sl.label) + " = " + Fmt(sl.value, "%.3g");
    mjr_label(bar, mjFONT_NORMAL, text.c_str(), 0, 0, 0, 0, 1, 1, 1, &con_);
  }
}

void App::Render(const mjrRect& full) {
  panel_height_ = std::min(64, full.height / 5);
  const int top = full.height - panel_height_;
  const int half = full.width / 2;
  mjrRect left = {0, panel_height_, half - 1, top};
  mjrRect right = {half + 1, panel_height_, full.width - half - 1, top};
  RenderSide(0, left);
  RenderSide(1, right);
  mjr_rectangle({half - 1, panel_height_, 2, top}, 1, 1, 1, 1);
  RenderSliders({0, 0, full.width, panel_height_});
  if (help_) {
    mjr_overlay(mjFONT_NORMAL, mjGRID_BOTTOMLEFT, left,
                "space\nright\nbackspace\n1 / 2\nC / F\nH\ndouble-click\nctrl+drag\nEsc",
                "pause\nsingle step\nreset\nnext solver left / right\ncontact points / forces\n"
                "help\nselect body\nperturb body\nquit",
                &con_);
  }
}

int App::Record() {
  mjr_setBuffer(mjFB_OFFSCREEN, &con_);
  FrameWriter writer;
  std::string err;
  if (!writer.Open(record_dir_, format_, width_, height_, fps_, &err)) return Fail(err);
  const int steps = std::max(1, static_cast<int>(std::lround(1.0 / (fps_ * m_->opt.timestep))));
  std::vector<unsigned char> rgb(static_cast<size_t>(width_) * height_ * 3);
  const mjrRect full = {0, 0, width_, height_};
  for (int f = 0; f < frames_; f++) {
    if (f > 0) {
      for (int k = 0; k < steps; k++) StepBoth();
    }
    Render(full);
    mjr_readPixels(rgb.data(), nullptr, full, &con_);
    if (!writer.Write(rgb.data(), &err)) return Fail(err);
    tools::Progress("record", f + 1, frames_);
  }
  std::fprintf(stderr, "\n");
  if (!writer.Close()) return Fail("ffmpeg failed to write " + writer.output());
  std::printf("ck-viewer: wrote %d frames (%d steps each) to %s: left %s, right %s\n",
              writer.frames(), steps, writer.output().c_str(), ck_solverName(side_[0].solver),
              ck_solverName(side_[1].solver));
  for (int i = 0; i < 2; i++) {
    const Side& s = side_[i];
    std::printf("  %-5s %-8s step %.3f ms, %d contacts, max penetration %.3g mm\n",
                i == 0 ? "left" : "right", ck_solverName(s.solver), s.step_ms, s.ncon,
                1e3 * s.max_penetration);
  }
  return 0;
}

void App::FramebufferPos(double wx, double wy, double* fx, double* fy) const {
  int ww, wh;
  glfwGetWindowSize(window_, &ww, &wh);
  *fx = ww > 0 ? wx * fb_width_ / ww : wx;
  *fy = wh > 0 ? wy * fb_height_ / wh : wy;
}

int App::SideAt(double fx) const { return fx < fb_width_ / 2 ? 0 : 1; }

int App::SliderAt(double fx, double fy) const {
  const double y = fb_height_ - fy;  // bottom-left origin
  for (size_t k = 0; k < sliders_.size(); k++) {
    const mjrRect& r = sliders_[k].rect;
    if (fx >= r.left && fx < r.left + r.width && y >= r.bottom && y < r.bottom + r.height) {
      return static_cast<int>(k);
    }
  }
  return -1;
}

void App::SetSliderFromX(int i, double fx) {
  Slider& sl = sliders_[i];
  const double t = std::clamp((fx - sl.rect.left) / std::max(1, sl.rect.width), 0.0, 1.0);
  sl.value = sl.log
                 ? std::pow(10.0, std::log10(sl.lo) + t * (std::log10(sl.hi) - std::log10(sl.lo)))
                 : sl.lo + t * (sl.hi - sl.lo);
  ApplySliders();
}

void App::OnKey(int key, int action, int mods) {
  if (action == GLFW_RELEASE) return;
  switch (key) {
    case GLFW_KEY_ESCAPE:
      glfwSetWindowShouldClose(window_, 1);
      break;
    case GLFW_KEY_SPACE:
      paused_ = !paused_;
      break;
    case GLFW_KEY_RIGHT:
      if (paused_) StepBoth();
      break;
    case GLFW_KEY_BACKSPACE:
      Reset();
      break;
    case GLFW_KEY_1:
    case GLFW_KEY_2: {
      const int i = key == GLFW_KEY_1 ? 0 : 1;
      SetSolver(i, NextSolver(side_[i].solver));
      break;
    }
    case GLFW_KEY_C:
      opt_.flags[mjVIS_CONTACTPOINT] ^= 1;
      break;
    case GLFW_KEY_F:
      opt_.flags[mjVIS_CONTACTFORCE] ^= 1;
      break;
    case GLFW_KEY_H:
    case GLFW_KEY_F1:
      help_ = !help_;
      break;
    default:
      break;
  }
}

void App::OnButton(int button, int action, int mods) {
  double wx, wy, fx, fy;
  glfwGetCursorPos(window_, &wx, &wy);
  FramebufferPos(wx, wy, &fx, &fy);
  mx_ = fx;
  my_ = fy;
  left_down_ = glfwGetMouseButton(window_, GLFW_MOUSE_BUTTON_LEFT) == GLFW_PRESS;
  right_down_ = glfwGetMouseButton(window_, GLFW_MOUSE_BUTTON_RIGHT) == GLFW_PRESS;
  middle_down_ = glfwGetMouseButton(window_, GLFW_MOUSE_BUTTON_MIDDLE) == GLFW_PRESS;
  if (action == GLFW_RELEASE) {
    drag_slider_ = -1;
    pert_.active = 0;
    return;
  }

  // sliders
  const int k = SliderAt(fx, fy);
  if (k >= 0 && button == GLFW_MOUSE_BUTTON_LEFT) {
    drag_slider_ = k;
    SetSliderFromX(k, fx);
    return;
  }
  if (fb_height_ - fy < panel_height_) return;

  // 3D view: the side under the mouse is the one selections are made in
  const int i = SideAt(fx);
  drag_side_ = i;
  Side& s = side_[i];
  const bool control = mods & GLFW_MOD_CONTROL;
  if (control && pert_.select > 0) {
    const int kind = button == GLFW_MOUSE_BUTTON_RIGHT  ? mjPERT_TRANSLATE
                     : button == GLFW_MOUSE_BUTTON_LEFT ? mjPERT_ROTATE
                                                        : 0;
    if (kind && !pert_.active) mjv_initPerturb(m_, s.d, &s.scn, &pert_);
    pert_.active = kind;
  }

  // double-click: select a body (left), look at a point (right)
  const double now = glfwGetTime();
  const bool dbl = now - last_click_ < 0.3;
  last_click_ = now;
  if (!dbl) return;
  const int half = fb_width_ / 2;
  const mjrRect r = {i == 0 ? 0 : half, panel_height_, half, fb_height_ - panel_height_};
  mjtNum selpnt[3];
  int selgeom = -1, selskin = -1;
#if mjVERSION_HEADER >= 300
  int selflex = -1;  // MuJoCo 3.x also reports flex selections
  const int selbody = mjv_select(m_, s.d, &opt_, static_cast<mjtNum>(r.width) / r.height,
                                 (fx - r.left) / r.width, (fb_height_ - fy - r.bottom) / r.height,
                                 &s.scn, selpnt, &selgeom, &selflex, &selskin);
#else
  const int selbody =
      mjv_select(m_, s.d, &opt_, static_cast<mjtNum>(r.width) / r.height, (fx - r.left) / r.width,
                 (fb_height_ - fy - r.bottom) / r.height, &s.scn, selpnt, &selgeom, &selskin);
#endif
  if (button == GLFW_MOUSE_BUTTON_LEFT) {
    pert_.select = selbody > 0 ? selbody : 0;
    pert_.skinselect = selskin;
    if (selbody > 0) {
      mjtNum tmp[3];
      mju_sub3(tmp, selpnt, s.d->xpos + 3 * selbody);
      mju_mulMatTVec(pert_.localpos, s.d->xmat + 9 * selbody, tmp, 3, 3);
    }
  } else if (selbody >= 0) {
    mju_copy3(cam_.lookat, selpnt);
  }
  pert_.active = 0;
}

void App::OnMove(double wx, double wy) {
  double fx, fy;
  FramebufferPos(wx, wy, &fx, &fy);
  const double dx = fx - mx_, dy = fy - my_;
  mx_ = fx;
  my_ = fy;
  if (drag_slider_ >= 0) {
    SetSliderFromX(drag_slider_, fx);
    return;
  }
  if (!left_down_ && !right_down_ && !middle_down_) return;
  const bool shift = glfwGetKey(window_, GLFW_KEY_LEFT_SHIFT) == GLFW_PRESS ||
                     glfwGetKey(window_, GLFW_KEY_RIGHT_SHIFT) == GLFW_PRESS;
  int action;
  if (right_down_) {
    action = shift ? mjMOUSE_MOVE_H : mjMOUSE_MOVE_V;
  } else if (left_down_) {
    action = shift ? mjMOUSE_ROTATE_H : mjMOUSE_ROTATE_V;
  } else {
    action = mjMOUSE_ZOOM;
  }
  const double h = std::max(1, fb_height_ - panel_height_);
  Side& s = side_[drag_side_];
  if (pert_.active) {
    mjv_movePerturb(m_, s.d, action, dx / h, -dy / h, &s.scn, &pert_);
  } else {
    contactkit::MoveCamera(m_, action, dx / h, -dy / h, &s.scn, &cam_);
  }
}

void App::OnScroll(double dy) {
  contactkit::MoveCamera(m_, mjMOUSE_ZOOM, 0, -0.05 * dy, &side_[0].scn, &cam_);
}

int App::Interactive() {
  glfwSetWindowUserPointer(window_, this);
  glfwSetKeyCallback(window_, [](GLFWwindow* w, int key, int, int action, int mods) {
    From(w)->OnKey(key, action, mods);
  });
  glfwSetMouseButtonCallback(window_, [](GLFWwindow* w, int button, int action, int mods) {
    From(w)->OnButton(button, action, mods);
  });
  glfwSetCursorPosCallback(window_,
                           [](GLFWwindow* w, double x, double y) { From(w)->OnMove(x, y); });
  glfwSetScrollCallback(window_, [](GLFWwindow* w, double, double dy) { From(w)->OnScroll(dy); });

  // real time: step both views until simulated time catches up with wall time
  auto wall0 = std::chrono::steady_clock::now();
  double sim0 = side_[0].d->time;
  while (!glfwWindowShouldClose(window_)) {
    glfwPollEvents();
    const auto now = std::chrono::steady_clock::now();
    if (paused_) {
      wall0 = now;
      sim0 = side_[0].d->time;
    } else {
      const double target = sim0 + std::chrono::duration<double>(now - wall0).count();
      const auto budget = now + std::chrono::milliseconds(40);
      while (side_[0].d->time < target && std::chrono::steady_clock::now() < budget) StepBoth();
      if (side_[0].d->time < target) {  // slower than real time: do not try to catch up
        wall0 = std::chrono::steady_clock::now();
        sim0 = side_[0].d->time;
      }
    }
    glfwGetFramebufferSize(window_, &fb_width_, &fb_height_);
    Render({0, 0, fb_width_, fb_height_});
    glfwSwapBuffers(window_);
  }
  return 0;
}

int App::ParseArgs(int argc, char** argv, tools::CommandLine* cl) {
  auto solver = [](int* side) {
    return [side](const std::string& v, std::string* err) {
      *side = tools::SolverFromName(v, err);
      return *side >= 0;
    };
  };
  int format = -1;  // auto
  cl->Positional("model", &model_arg_);
  cl->Custom("--left", solver(&left_));
  cl->Custom("--right", solver(&right_));
  cl->Texts("--set", &sets_);
  cl->Text("--record", &record_dir_);
  cl->Int("--frames", &frames_, 1, 100000, "a positive integer");
  cl->Int("--fps", &fps_, 1, 100000, "a positive integer");
  cl->Choice("--format", "format", &format,
             {{"auto", -1}, {"png", FrameWriter::kPng}, {"video", FrameWriter::kVideo}});
  cl->Custom("--size", [this](const std::string& v, std::string* err) {
    const bool ok = std::sscanf(v.c_str(), "%dx%d", &width_, &height_) == 2 && width_ >= 64 &&
                    height_ >= 64 && width_ <= 8192 && height_ <= 8192;
    if (!ok) *err = "want WIDTHxHEIGHT (64..8192), got '" + v + "'";
    return ok;
  });
  cl->Flag("--paused", &paused_);
  if (const int rc = cl->Parse(argc, argv); rc >= 0) return rc;
  if (model_arg_.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  if (format == FrameWriter::kVideo && !HaveFfmpeg()) {
    return cl->Fail("--format video needs ffmpeg (apt-get install ffmpeg)");
  }
  if (format < 0) format = HaveFfmpeg() ? FrameWriter::kVideo : FrameWriter::kPng;
  format_ = static_cast<FrameWriter::Format>(format);
  return -1;
}

int App::Main(int argc, char** argv) {
  tools::CommandLine cl("ck-viewer", kUsage);
  if (const int rc = ParseArgs(argc, argv, &cl); rc >= 0) return rc;
  std::string err;
  if (!Init(&err)) return Fail(err);
  return record_dir_.empty() ? Interactive() : Record();
}

}  // namespace
}  // namespace contactkit::viewer

int main(int argc, char** argv) {
  contactkit::viewer::App app;
  return app.Main(argc, argv);
}
