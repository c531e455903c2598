/* Copyright 2026 The contactkit developers.
 *
 * A two-function stand-in for libmujoco, built twice by tests/CMakeLists.txt: once plainly (the
 * call goes through the PLT, as in Debian's libmujoco) and once with -Bsymbolic-functions (the call
 * is bound inside the library, which an LD_PRELOAD'ed definition cannot replace). */
__attribute__((visibility("default"))) int mj_fwdConstraint(int x) { return x + 1; }
__attribute__((visibility("default"))) int mj_forwardSkip(int x) { return 2 * mj_fwdConstraint(x); }
