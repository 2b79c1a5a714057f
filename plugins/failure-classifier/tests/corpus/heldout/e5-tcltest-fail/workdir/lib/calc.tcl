proc half {n} { expr {$n / 3} }
