-module(app).
-export([go/0]).
go() -> calc:add(1, 2).
