package Report;
use strict;
use YAML::Tiny;
sub load { return YAML::Tiny->read($_[0]) }
1;
