package demo

import "golang.org/x/text/language"

var T = language.English
