package main

import "golang.org/x/text/language"

func main() { _ = language.English }
