package demo

func Count() int {
	n := 0
	for i := range 10 {
		n += i
	}
	return n
}
