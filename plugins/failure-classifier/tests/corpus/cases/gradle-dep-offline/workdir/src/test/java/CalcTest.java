import org.junit.Test;
import static org.junit.Assert.assertEquals;

public class CalcTest {
  @Test public void adds() { assertEquals(5, Calc.add(2, 3)); }
}
