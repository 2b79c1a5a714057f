package require tcltest
namespace import tcltest::*
source [file join [file dirname [info script]] .. lib calc.tcl]
test half-1 {half of 8} {half 8} 4
set failed $::tcltest::numTests(Failed)
cleanupTests
exit [expr {$failed > 0}]
