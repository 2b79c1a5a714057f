public class App {
  public static void main(String[] a) {
    int n = "x";
  }
}
