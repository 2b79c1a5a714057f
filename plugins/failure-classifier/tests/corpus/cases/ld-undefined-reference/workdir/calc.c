int plus(int a, int b) { return a + b; }
