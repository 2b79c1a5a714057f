module Calc (add) where

add :: Int -> Int -> Int
add a b = a + b
