import Calc (add)
import System.Exit

main :: IO ()
main = if add 2 3 == 5 then pure () else die "add 2 3 /= 5"
