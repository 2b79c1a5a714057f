int add(int a, int b) { return a + b }
int main(void) { return add(2, 3) != 5; }
