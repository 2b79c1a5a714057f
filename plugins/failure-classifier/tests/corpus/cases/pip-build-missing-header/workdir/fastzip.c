#include <Python.h>
#include <zstdx.h>

int f(void) { return 0; }
