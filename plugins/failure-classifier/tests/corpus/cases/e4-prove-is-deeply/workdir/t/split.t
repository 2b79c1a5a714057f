use strict;
use Test::More;
use Split;
is_deeply(Split::words("a  b"), ['a', 'b'], 'double spaces');
done_testing;
