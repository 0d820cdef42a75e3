// Stand-in header: the package keeps magma's headers next to libmagma.a.
#pragma once
int magma_standin_version(void);
