// A program that uses an installed contactkit: load a model, step it with ck_step.
#include <contactkit/contactkit.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  char error[1000];
  mjModel* m = ck_loadXML(argv[1], nullptr, error, sizeof(error));
  if (!m) {
    std::fprintf(stderr, "%s\n", error);
    return 1;
  }
  mjData* d = mj_makeData(m);
  ckHandle* ck = ck_make(m, nullptr, error, sizeof(error));
  if (!ck) {
    std::fprintf(stderr, "%s\n", error);
    return 1;
  }
  int steps = 0;
  for (; steps < 100; steps++) ck_step(ck, m, d);
  std::printf("steps=%d solver=%s time=%g\n", steps, ck_solverName(ck_stats(ck)->solver), d->time);
  ck_free(ck);
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}
