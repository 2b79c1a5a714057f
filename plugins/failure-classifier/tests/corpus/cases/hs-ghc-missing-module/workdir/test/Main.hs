import Calc (add)
import Data.Aeson (encode)

main :: IO ()
main = print (encode (add 2 3))
