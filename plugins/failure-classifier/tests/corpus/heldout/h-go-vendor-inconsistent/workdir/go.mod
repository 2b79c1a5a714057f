module example.com/demo

go 1.19

require golang.org/x/text v0.14.0
