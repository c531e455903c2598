// Copyright 2026 The contactkit developers.
#include "plugin/step/anchor.h"

#include <algorithm>
#include <cstdint>

namespace contactkit {
namespace {

// world position of a point given in body b's frame
void WorldPoint(const mjData* d, int b, const double local[3], double out[3]) {
  const double* R = d->xmat + 9 * b;
  for (int i = 0; i < 3; i++) {
    out[i] = d->xpos[3 * b + i] + R[3 * i] * local[0] + R[3 * i + 1] * local[1] +
             R[3 * i + 2] * local[2];
  }
}

// a world point in body b's frame
void LocalPoint(const mjData* d, int b, const double world[3], double out[3]) {
  const double* R = d->xmat + 9 * b;
  double rel[3];
  for (int i = 0; i < 3; i++) rel[i] = world[i] - d->xpos[3 * b + i];
  for (int i = 0; i < 3; i++) out[i] = R[i] * rel[0] + R[3 + i] * rel[1] + R[6 + i] * rel[2];
}

// smallest power of two >= n (n >= 1)
int PowerOfTwoAtLeast(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

void Anchors::Allocate(int max_contacts, int max_rows) {
  const size_t n = std::max(max_contacts, 1);
  committed_.assign(n, Record_{});
  pending_.assign(n, Record_{});
  head_.assign(PowerOfTwoAtLeast(2 * static_cast<int>(n)), -1);
  next_.assign(n, -1);
  used_.assign(n, 0);
  disp_.assign(std::max(max_rows, 1), 0.0);
  world_.assign(3 * n, 0.0);
  points_.assign(6 * n, 0.0);
  turn_.assign(3 * n, 0.0);
  matched_.assign(n, 0);
  Clear();
}

void Anchors::Clear() {
  ncommitted_ = npending_ = 0;
  pending_valid_ = false;
  Index();
}

int Anchors::Bucket(const int geom[2]) const {
  uint32_t h = static_cast<uint32_t>(geom[0]) * 0x9E3779B1u ^ static_cast<uint32_t>(geom[1]);
  h *= 0x85EBCA77u;
  h ^= h >> 15;
  return static_cast<int>(h & static_cast<uint32_t>(nbucket_ - 1));
}

void Anchors::Index() {
  if (head_.empty()) return;  // not allocated yet
  nbucket_ = PowerOfTwoAtLeast(std::max(2 * ncommitted_, 1));
  std::fill(head_.begin(), head_.begin() + nbucket_, -1);
  for (int i = ncommitted_ - 1; i >= 0; i--) {  // each bucket lists its anchors in order
    const int b = Bucket(committed_[i].geom);
    next_[i] = head_[b];
    head_[b] = i;
  }
}

const double* Anchors::Displacements(const mjData* d, const Problem& p) {
  double* disp = disp_.data();
  for (int i = 0; i < p.nrow; i++) disp[i] = 0;
  for (int i = 0; i < ncommitted_; i++) used_[i] = 0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    matched_[c] = 0;
    if (con.dim < 3 || ncommitted_ == 0) continue;

    // the nearest unused anchor of the pair
    int best = -1;
    double best_d2 = kMatchRadius * kMatchRadius, best_x[2][3] = {};
    for (int a = head_[Bucket(con.geom)]; a >= 0; a = next_[a]) {
      const Record_& r = committed_[a];
      if (r.geom[0] != con.geom[0] || r.geom[1] != con.geom[1] || used_[a]) continue;
      double x[2][3];
      WorldPoint(d, r.body[0], r.local[0], x[0]);
      WorldPoint(d, r.body[1], r.local[1], x[1]);
      double d2 = 0;
      for (int i = 0; i < 3; i++) {
        const double e = 0.5 * (x[0][i] + x[1][i]) - con.pos[i];
        d2 += e * e;
      }
      if (d2 < best_d2) {
        best = a;
        best_d2 = d2;
        mju_copy(best_x[0], x[0], 6);
      }
    }
    if (best < 0) continue;
    used_[best] = 1;
    matched_[c] = 1;

    // disp + x2 - x1 in the contact's tangent frame
    mju_copy(points_.data() + 6 * c, best_x[0], 6);
    double* w = world_.data() + 3 * c;
    for (int i = 0; i < 3; i++) w[i] = committed_[best].disp[i] + best_x[1][i] - best_x[0][i];
    disp[con.row] = committed_[best].state;
    disp[con.row + 1] = mju_dot3(w, con.frame + 3);
    disp[con.row + 2] = mju_dot3(w, con.frame + 6);

    // the angular displacement kept, on the normal (torsion) and the tangents (rolling)
    double* turn = turn_.data() + 3 * c;
    mju_copy3(turn, committed_[best].turn);
    for (int r = 3; r < con.dim; r++) disp[con.row + r] = mju_dot3(turn, con.frame + 3 * (r - 3));
  }
  return disp;
}

void Anchors::Record(const mjData* d, const Problem& p, const double* anchor_disp) {
  npending_ = 0;
  pending_valid_ = true;
  if (!anchor_disp) return;
  const int cap = static_cast<int>(pending_.size());
  for (int c = 0; c < p.ncon && npending_ < cap; c++) {
    const Contact& con = p.con[c];
    if (con.dim < 3) continue;
    Record_& r = pending_[npending_++];
    for (int s = 0; s < 2; s++) {
      const int b = con.body[s];
      r.geom[s] = con.geom[s];
      r.body[s] = b;
      LocalPoint(d, b, con.pos, r.local[s]);
    }
    r.state = anchor_disp[con.row];
    const double a1 = anchor_disp[con.row + 1], a2 = anchor_disp[con.row + 2];
    for (int i = 0; i < 3; i++) r.disp[i] = a1 * con.frame[3 + i] + a2 * con.frame[6 + i];
    mju_zero3(r.turn);
    for (int a = 3; a < con.dim; a++)
      mju_addToScl3(r.turn, con.frame + 3 * (a - 3), anchor_disp[con.row + a]);
  }
}

void Anchors::RecordNone() {
  npending_ = 0;
  pending_valid_ = true;
}

void Anchors::Commit() {
  if (!pending_valid_) return;
  committed_.swap(pending_);
  ncommitted_ = npending_;
  npending_ = 0;
  pending_valid_ = false;
  Index();
}

void Anchors::CopyFrom(const Anchors& other) {
  const int n = std::min(other.ncommitted_, static_cast<int>(committed_.size()));
  std::copy(other.committed_.begin(), other.committed_.begin() + n, committed_.begin());
  ncommitted_ = n;
  npending_ = 0;
  pending_valid_ = false;
  Index();
}

}  // namespace contactkit
