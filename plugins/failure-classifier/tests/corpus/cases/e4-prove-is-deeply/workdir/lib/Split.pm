package Split;
use strict;
sub words { return [ split / /, $_[0] ] }
1;
