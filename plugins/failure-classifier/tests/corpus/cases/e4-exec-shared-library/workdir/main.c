#include <stdio.h>
int add(int, int);
int main(void) { printf("%d\n", add(1, 2)); return 0; }
