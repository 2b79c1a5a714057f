-module(calc_tests).
-include_lib("eunit/include/eunit.hrl").
double_test() -> ?assertEqual(4, calc:double(2)).
