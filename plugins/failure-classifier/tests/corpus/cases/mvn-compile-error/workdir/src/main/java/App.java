public class App {
  static int twice(int x) { return x * 2 }
}
