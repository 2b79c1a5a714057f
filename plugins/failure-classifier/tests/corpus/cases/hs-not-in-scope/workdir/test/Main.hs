import Calc (add)

main :: IO ()
main = print (add 2 three)
