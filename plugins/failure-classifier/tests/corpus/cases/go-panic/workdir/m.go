package demo

var cache map[string]int

func Put(k string) { cache[k] = 1 }
