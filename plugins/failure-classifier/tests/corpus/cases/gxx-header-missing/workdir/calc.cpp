#include <boost/optional.hpp>
#include <cassert>

int main() {
  boost::optional<int> x = 3;
  assert(*x == 3);
}
