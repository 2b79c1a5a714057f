import chartlib

print(chartlib.Axis())
