#include <assert.h>
int add(int, int);
int main(void) { assert(add(2, 3) == 5); return 0; }
