#ifndef GREET_H
#define GREET_H
/* Writes "hello, <name>!" into buf; returns the length written. */
int greet(const char *name, char *buf, int size);
const char *greet_version(void);
#endif
