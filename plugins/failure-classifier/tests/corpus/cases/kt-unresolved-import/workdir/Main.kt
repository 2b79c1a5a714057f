import com.squareup.moshi.Moshi

fun add(a: Int, b: Int) = a + b

fun main() {
    check(add(2, 3) == 5) { "add(2, 3) != 5" }
}
