public class App {
  public static void main(String[] a) {
    System.out.println(org.greeter.Greeter.greet("x"));
  }
}
