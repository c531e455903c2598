// Copyright 2026 The contactkit developers.
//
// Contact anchors for comfree's position-level stick (setting comfree.anchor): per contact the
// material points of both bodies that coincided when its step was solved and the displacement the
// solver kept; the next solve's contact of the same geom pair nearby starts from disp + x2 - x1,
// and (condim 4, 6) from the torsional and rolling angle kept, a world vector projected on its
// frame.
// Life cycle: each constraint stage reads the committed anchors (Displacements) and records its
// own as pending (Record; not in RK4's later stages); ck_step commits them after the integrator
// (Commit), ck_forward never does. docs/solvers.md (comfree, Anchors) has the details.
#ifndef CONTACTKIT_PLUGIN_ANCHOR_H_
#define CONTACTKIT_PLUGIN_ANCHOR_H_

#include <mujoco/mujoco.h>

#include <vector>

#include "solvers/common/problem.h"

namespace contactkit {

// the anchors of one handle: the committed ones (from the last step) and the pending ones
class Anchors {
 public:
  // a contact farther than this from every anchor of its geom pair gets a fresh one (m)
  static constexpr double kMatchRadius = 0.01;

  // room for max_contacts anchors and a problem of max_rows rows
  void Allocate(int max_contacts, int max_rows);

  // forget every anchor (committed and pending)
  void Clear();

  // the displacement of each contact of p from its committed anchor at the geometry in d, in
  // p's rows (Problem::disp layout); the array lives here until the next call
  const double* Displacements(const mjData* d, const Problem& p);

  // pending anchors: the contacts of p with the solver's anchor displacements (Solution::
  // anchor_disp; null: none), or no contacts at all (RecordNone); ignored while held
  void Record(const mjData* d, const Problem& p, const double* anchor_disp);
  void RecordNone();

  // the step is taken: the pending anchors become the committed ones (nothing pending: kept)
  void Commit();

  // committed anchors of another table (the derivative's shadow handle takes the caller's);
  // pending ones are dropped
  void CopyFrom(const Anchors& other);

  int size() const { return ncommitted_; }

  // problem contact c of the last Displacements had an anchor: its displacement disp + x2 - x1
  // in the world frame (the contact's disp is its projection on the contact's tangent axes);
  // null if it had none (its displacement is then zero whatever the state)
  const double* Anchored(int c) const { return matched_[c] ? world_.data() + 3 * c : nullptr; }

  // ... and the anchor's material points x1, x2 then (world frame, 6), if it had one
  const double* Points(int c) const { return points_.data() + 6 * c; }

  // ... and its angular displacement kept (world frame, 3), whose projections on the contact's
  // normal and tangents are the contact's torsional and rolling displacements
  const double* Turn(int c) const { return turn_.data() + 3 * c; }

 private:
  struct Record_ {
    int geom[2];         // geom pair (MuJoCo's order)
    int body[2];         // their bodies
    double local[2][3];  // the material point on each body, in the body's frame
    double disp[3];      // displacement kept (world frame)
    double turn[3];      // angular displacement kept (world frame; torsion and rolling)
    double state;        // the solver's state of the anchor (at disp's normal row)
  };

  std::vector<Record_> committed_, pending_;  // (max_contacts)
  std::vector<int> head_;                     // hash bucket -> first committed anchor, or -1
                                              //   (power of two >= 2 max_contacts)
  std::vector<int> next_;                     // committed anchor -> next in its bucket, or -1
  std::vector<char> used_;                    // committed anchor taken in this match
  std::vector<double> disp_;                  // Displacements' output (max_rows)
  std::vector<double> world_;                 // ... world displacement by contact (3 max_contacts)
  std::vector<double> points_;                // ... material points x1, x2    (6 max_contacts)
  std::vector<double> turn_;                  // ... angular displacement kept (3 max_contacts)
  std::vector<char> matched_;                 // ... the contact had an anchor (max_contacts)
  int ncommitted_ = 0, npending_ = 0;
  int nbucket_ = 1;  // buckets in use: a power of two >= 2 ncommitted_

  // bucket of a geom pair among nbucket_
  int Bucket(const int geom[2]) const;

  // hash the committed anchors by geom pair (linear in their number)
  void Index();
  bool pending_valid_ = false;
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_ANCHOR_H_
