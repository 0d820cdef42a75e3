#include <stdio.h>
#include "greet.h"

int greet(const char *name, char *buf, int size) { return snprintf(buf, size, "hello, %s!", name); }

const char *greet_version(void) { return "1.2.0"; }
