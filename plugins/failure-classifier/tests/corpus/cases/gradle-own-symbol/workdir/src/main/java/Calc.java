public class Calc { static int add(int a, int b) { return sum(a, b); } }
