#!/opt/corpus/bin/python9
print(2 + 3)
