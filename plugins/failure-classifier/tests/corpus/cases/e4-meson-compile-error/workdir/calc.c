#include <stdio.h>
int main(void) {
    printf("%d\n", totl(2, 3));
    return 0;
}
