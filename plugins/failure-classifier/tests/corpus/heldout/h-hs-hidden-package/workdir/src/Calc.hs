module Calc (add) where

import qualified Data.Map as M

add :: Int -> Int -> Int
add a b = M.findWithDefault 0 a (M.fromList [(a, a + b)])
