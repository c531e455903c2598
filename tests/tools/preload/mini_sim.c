/* Copyright 2026 The contactkit developers.
 *
 * An unmodified MuJoCo program for the preload tests: loads a model, steps it with mj_step and
 * prints the number of steps and the mean contact count. Linked only against libmujoco. */
#include <mujoco/mujoco.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mini_sim model.xml nstep\n");
    return 2;
  }
  char error[1000];
  mjModel* m = mj_loadXML(argv[1], NULL, error, sizeof(error));
  if (!m) {
    fprintf(stderr, "mini_sim: %s\n", error);
    return 1;
  }
  mjData* d = mj_makeData(m);
  const int nstep = atoi(argv[2]);
  long contacts = 0;
  for (int t = 0; t < nstep; t++) {
    mj_step(m, d);
    contacts += d->ncon;
  }
  printf("steps %d contacts per step %.6f qpos0 %.17g\n", nstep,
         nstep > 0 ? (double)contacts / nstep : 0.0, m->nq > 0 ? d->qpos[0] : 0.0);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}
