int add(int a, int b) {
  int unused;
  return a + b;
}
