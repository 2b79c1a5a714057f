-module(calc).
-export([sum/2]).
sum(A, B) -> A + B.
