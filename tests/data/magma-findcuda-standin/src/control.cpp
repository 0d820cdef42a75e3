// A C++ file of the library: compiled by the C++ compiler through CMAKE_CXX_COMPILER_LAUNCHER.
#include "magma_v2.h"

int magma_standin_version(void) { return 20601; }
