use v5.99;
print "ok\n";
