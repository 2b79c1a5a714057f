int add(int a, int b) {
  int s = a + b
  return s;
}
