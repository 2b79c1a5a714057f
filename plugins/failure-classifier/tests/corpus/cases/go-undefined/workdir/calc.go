package demo

func Double(x int) int { return times(x, 2) }
