public class App {
  public static void main(String[] a) {
    System.out.println(com.acme.Json.of(1));
  }
}
