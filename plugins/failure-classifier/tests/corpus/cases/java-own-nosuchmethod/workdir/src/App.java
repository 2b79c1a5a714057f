public class App {
  static String name;
  public static void main(String[] a) {
    System.out.println(name.length());
  }
}
