int add(int a, int b) { return a + c; }
