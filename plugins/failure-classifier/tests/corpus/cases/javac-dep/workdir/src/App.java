import org.apache.commons.lang3.StringUtils;

public class App {
  public static void main(String[] a) {
    System.out.println(StringUtils.capitalize("x"));
  }
}
