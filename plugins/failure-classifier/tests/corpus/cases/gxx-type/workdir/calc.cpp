#include <string>
#include <cassert>

int twice(int x) { return 2 * x; }

int main() {
  std::string s = "4";
  assert(twice(s) == 8);
}
