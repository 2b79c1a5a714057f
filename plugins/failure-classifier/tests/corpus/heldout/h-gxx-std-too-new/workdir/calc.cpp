#include <cassert>
int main() { assert(1 + 1 == 2); }
