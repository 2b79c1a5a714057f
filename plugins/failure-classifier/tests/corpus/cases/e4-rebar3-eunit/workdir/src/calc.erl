-module(calc).
-export([double/1]).
double(X) -> X * 3.
