#include <cstdio>
#include <cstring>
#include "cusmoke.h"

int main(int argc, char **argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("cusmoke-app 0.2.0 (%s)\n", cusmoke_version());
    return 0;
  }
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  return cusmoke_saxpy(4, 2.0f, x, y);
}
