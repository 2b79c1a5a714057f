public class Names {
  static String first;
  public static int len() { return first.length(); }
}
