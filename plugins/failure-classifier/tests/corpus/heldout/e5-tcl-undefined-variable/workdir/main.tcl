set items {1 2 3}
foreach i $items { incr sum $i }
puts $totl
