#pragma once
#ifdef __cplusplus
extern "C" {
#endif
/* Version string of the library; a kernel lives next to it so the archive carries a fatbin. */
const char *cusmoke_version(void);
int cusmoke_saxpy(int n, float a, const float *x, float *y);
#ifdef __cplusplus
}
#endif
