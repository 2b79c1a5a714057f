public class Calc {}
