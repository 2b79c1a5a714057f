package require Tcl 9.0
puts [lseq 3]
