fun find(x: Int): Int? = if (x > 9) x else null

fun main() {
    println(find(2)!! + 3)
}
