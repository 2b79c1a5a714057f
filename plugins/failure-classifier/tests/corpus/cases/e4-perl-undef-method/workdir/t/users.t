use strict;
use Test::More;
use Users;
is(Users::name_of(2), 'bob');
done_testing;
