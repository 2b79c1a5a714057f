package demo

func Sq(x int) int { return x + x }
