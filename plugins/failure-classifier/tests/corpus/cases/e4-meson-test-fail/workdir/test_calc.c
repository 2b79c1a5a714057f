#include <assert.h>
static int square(int x) { return x * 2; }
int main(void) {
    assert(square(3) == 9);
    return 0;
}
