-module(price).
-export([total/1]).
total(L) -> lists:sum(L) + "0".
