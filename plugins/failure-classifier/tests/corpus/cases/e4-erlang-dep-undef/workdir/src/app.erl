-module(app).
-export([go/0]).
go() -> jsx:encode(#{a => 1}).
