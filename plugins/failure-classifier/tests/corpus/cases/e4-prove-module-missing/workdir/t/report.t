use strict;
use Test::More;
use Report;
ok(Report->can('load'));
done_testing;
