module Calc (add) where

add :: Int -> Int -> Int
add a b = head (filter (> 99) [a, b])
