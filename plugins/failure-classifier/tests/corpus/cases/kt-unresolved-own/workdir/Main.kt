fun add(a: Int, b: Int) = a + b

fun main() {
    check(sum(2, 3) == 5) { "add(2, 3) != 5" }
}
