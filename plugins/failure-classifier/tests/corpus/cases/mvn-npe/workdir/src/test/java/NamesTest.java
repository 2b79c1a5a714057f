import static org.junit.jupiter.api.Assertions.assertEquals;
import org.junit.jupiter.api.Test;

class NamesTest {
  @Test void len() { assertEquals(0, Names.len()); }
}
