#include <stddef.h>
int add(int a, int b) { int *p = NULL; return *p + a + b; }
